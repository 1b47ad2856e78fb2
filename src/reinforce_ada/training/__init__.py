"""The RL loop and everything a run writes: config tree, policy loss, trainer, checkpoints, metrics, report.

Owns: `TrainConfig` (composing the `[strategy]`, `[model]`, `[task]`, `[generation]`, `[rollout]` sections of the
folders below with `[optim]` and `[run]`), `losses.policy_loss`, `trainer.Trainer`, the embedded model's `warm_start`,
`checkpoint`, `tracking` (metrics.jsonl, TensorBoard), `report` and `rollout` (the trainer's side of Ray rollout
workers).
May import: `types`, `errors`, `cache`, `sampling`, `models`, `engines`, `tasks`, `evaluation`.
"""
