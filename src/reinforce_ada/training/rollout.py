"""The trainer's side of Ray rollout workers (`[rollout] workers > 0`; the pool itself is `engines.ray_pool`).

1) `rollout_pool` builds the `RayRolloutPool` the trainer samples with: each worker loads the policy's folder with
   the run's `[model]` settings and the `[generation]` sampling settings, seeded with the run's seed.
2) `guarded_step` runs one training step; if the pool loses its last worker mid-step it first saves a checkpoint of
   the state the step started from (model and optimizer are untouched until sampling ends; the strategy's and the
   prompt order's state are snapshotted before the step), then fails the run with an error that says how to resume.
   Resuming repeats the failed step exactly (sampling seeds derive from the chunk, not the worker).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from reinforce_ada.engines.ray_pool import NoWorkersLeft, RayRolloutPool
from reinforce_ada.errors import RunStopped
from reinforce_ada.training import checkpoint


def rollout_pool(cfg: Any, model: Any, tokenizer: Any, model_path: Path) -> RayRolloutPool:
    return RayRolloutPool(
        model,
        tokenizer,
        model_path=str(model_path),
        model_cfg=cfg.model,
        rollout=cfg.rollout,
        generation=cfg.generation,
        seed=cfg.run.seed,
    )


class RolloutWorkersLost(RunStopped):
    """No rollout worker is left; a checkpoint of the step's start was saved."""


def guarded_step(trainer: Any) -> dict[str, Any]:
    """`trainer.train_step()`; on `NoWorkersLeft`, save the step's starting state, then raise `RolloutWorkersLost`."""
    start = {k: copy.deepcopy(v) for k, v in trainer.state_dict().items() if k != "optimizer"}
    try:
        return trainer.train_step()
    except NoWorkersLeft as e:
        state = {**start, "optimizer": trainer.opt.state_dict()}  # no update happened: the optimizer is the start's
        ckpt = checkpoint.save(
            trainer.run_dir,
            trainer.step,
            state,
            trainer.model,
            trainer.tokenizer,
            keep=trainer.cfg.run.keep_checkpoints,
        )
        raise RolloutWorkersLost(
            f"{e}. Saved checkpoint {ckpt} (step {trainer.step}); once workers can run again, continue with "
            f"`reinforce-ada train --resume {trainer.run_dir}`"
        ) from e
