"""Integrations with other training stacks. They sit on top of the library: they may import any folder, and nothing
in the library imports them.

- `integrations.trl`: `AdaGRPOConfig` and `AdaGRPOTrainer`, a drop-in TRL `GRPOTrainer` whose sampling is decided
  by our strategies (`pip install -e ".[trl]"`; see docs/trl.md).
- `integrations.verl` (+ `verl_driver`): a verl 0.9 plugin (entry point `verl.plugins`): `AdaPPOTrainer`,
  registered as `trainer.v1.trainer_mode=reinforce_ada`, and `AdaReplayBuffer` (`pip install -e ".[verl]"`; see
  docs/verl.md).
"""
