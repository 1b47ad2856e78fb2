"""The protocol the studies share: pre-registration (`prereg`), carrying runs across commits (`carry`), the
registered commit's worktree (`worktree`), the compact records every committed figure is regenerated from
(`records`), `compare` with the study flags on top (`compare`) and its results rebuilt from runs
(`compare_results`), the goals P1-P4 (`goals`), the compute headlines C0-C3 (`headlines`) and summary.json
(`summary`)."""
