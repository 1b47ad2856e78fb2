"""The protocol the studies share: pre-registration (`prereg`), carrying runs across commits (`carry`), the
registered commit's worktree (`worktree`), the compact records every committed figure is regenerated from
(`records`), a study resumed from those records alone on a wiped machine, its jobs run by the registered code
(`resume`, `jobrunner`), `compare` with the study flags on top (`compare`) and its results rebuilt from runs
(`compare_results`), the goals P1-P4 (`goals`), the compute headlines C0-C3 (`headlines`) and summary.json
(`summary`)."""
