"""Integrations with other training stacks. They sit on top of the library: they may import any folder, and nothing
in the library imports them.

- `integrations.trl`: `AdaGRPOConfig` and `AdaGRPOTrainer`, a drop-in TRL `GRPOTrainer` whose sampling is decided
  by our strategies (`pip install -e ".[trl]"`; see docs/trl.md).
"""
