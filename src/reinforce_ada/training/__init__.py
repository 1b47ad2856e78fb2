"""The RL loop and everything a run writes: config tree, policy loss, trainer, checkpoints, metrics, report.

Owns: `TrainConfig` (composing the `[strategy]`, `[model]`, `[task]`, `[generation]`, `[rollout]` sections of the
folders below with `[optim]` and `[run]`), `losses.policy_loss`, `trainer.Trainer` (with `learner`: its forward and
backward passes over a step's rows, and `resume`: loading its newest good checkpoint), the embedded model's `warm_start`
(`warm_tasks`: the tasks it is warm-started on, arithmetic and long-answer running sums), `checkpoint`, `tracking`
(metrics.jsonl and the trackers of `run.report_to`: `trackers`), `report`, `rollout` (the trainer's side of Ray rollout
workers), `run_dir` (the run folder's rules: one run per folder, no links, one trainer at a time), `gate` (the one gate
every write under a run folder passes; `tb_events`: TensorBoard's events through it), `inputs` (the digests of a run's
input files, checked on resume), `tracker_state` (where a resumed tracker writes: `trackers.json`), `guard` (update
rollback, stop on a failing verifier), `drift` (the sampler/learner mismatch metrics) and `oracle` (`estimator=oracle`:
exact pass rates of the trainer's own policy, exact-answer tasks only; a lower bound for running sums).
May import: `types`, `errors`, `cache`, `sampling`, `models`, `engines`, `tasks`, `evaluation`.
"""
