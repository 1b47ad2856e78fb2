"""Resuming a trainer: the newest good checkpoint of its run folder, loaded all or nothing.

1) `resume` tries the run folder's complete checkpoints newest first (`run_dir.complete`). One that fails its
   checksums, cannot be read, does not fit the model, holds non-finite weights or a state that does not match its
   own step is skipped with a warning and the one before it is tried; when none is good, a CheckpointError names
   why each failed. Metrics of steps after the loaded checkpoint are dropped (resuming repeats them); a run killed
   before its first checkpoint starts over, its metric lines too.
2) `load` puts one checkpoint into the trainer: model weights, optimizer, strategy (+ memory), prompt order, engine,
   both RNGs and the replay buffer (`Trainer.state_dict` is what it reads back). Any failure restores the weights
   it started from and raises CheckpointError, so the next older checkpoint is tried on the model as it was. A
   predictor whose learned feature width no longer fits the task's `features` is such a failure (it used to load,
   then fail mid-step); so is a recorded lr warm-up that is not a step count (it used to be ignored silently).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from reinforce_ada.training import checkpoint
from reinforce_ada.training import run_dir as run_folder


def resume(trainer: Any) -> bool:
    """Load the newest good checkpoint of `trainer.run_dir` into `trainer`; returns whether one was loaded."""
    found = run_folder.complete(trainer.run_dir)
    if not found:
        trainer.tracker.truncate_after(-1)  # a run killed before its first checkpoint starts over, lines and all
        return False
    errors = []
    for ckpt in found:
        try:
            load(trainer, ckpt)
        except checkpoint.CheckpointError as e:
            errors.append(str(e))
            print(f"warning: skipping checkpoint {ckpt.name}: {e}")
            continue
        trainer.tracker.truncate_after(trainer.step)
        return True
    raise checkpoint.CheckpointError("no usable checkpoint in " + str(trainer.run_dir) + ":\n  " + "\n  ".join(errors))


def load(trainer: Any, ckpt: Path) -> None:
    """One checkpoint into `trainer`, or a CheckpointError with the model's weights as they were (module doc, 2)."""
    state = checkpoint.load_state(ckpt)
    # a checkpoint written before the warm-up was recorded holds none: the one run.steps gives now (config.toml is
    # rewritten with the new run.steps before this, so the old count is not known)
    warmup = state.get("warmup_steps", trainer.warmup)
    if type(warmup) is not int or warmup < 0:
        raise checkpoint.CheckpointError(
            f"{ckpt}: its recorded lr warm-up {warmup!r} is not a step count (an int >= 0)"
        )
    model = trainer.model
    snapshot = [p.detach().clone() for p in model.parameters()]
    try:
        checkpoint.load_model_weights(model, ckpt / "model")
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise checkpoint.CheckpointError(f"{ckpt}: the model weights hold NaN or inf")
        trainer.opt.load_state_dict(state["optimizer"])
        trainer.strategy.load_state_dict(state["strategy"])
        check_feature_width(trainer.strategy, trainer.train_prompts, ckpt)
        trainer.order.load_state_dict(state["order"])
        trainer.sync_weights()  # vLLM would otherwise sample from the base weights until step 1 ends
        trainer.engine.load_state_dict(state["engine"])
        trainer.rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        if trainer.replay is not None:
            trainer.replay.load_state_dict(state["replay"])
    except (KeyError, ValueError, TypeError, RuntimeError, AttributeError, IndexError) as e:
        with torch.no_grad():
            for p, old in zip(model.parameters(), snapshot, strict=True):
                p.copy_(old)
        if isinstance(e, checkpoint.CheckpointError):
            raise
        raise checkpoint.CheckpointError(f"{ckpt}: its state does not fit this run ({type(e).__name__}: {e})") from None
    trainer.step = state["step"]  # checked by load_state: an int equal to the checkpoint's own step
    if warmup != trainer.warmup:
        print(f"note: lr warm-up stays the run's own {warmup} steps (run.steps now gives {trainer.warmup})",
              file=sys.stderr)  # fmt: skip
        trainer.warmup = warmup


def check_feature_width(strategy: Any, prompts: Any, ckpt: Path) -> None:
    """The predictor's learned feature weights must fit the task's `features` as they are now: a features file
    rewritten with another width since the checkpoint used to load and then fail in the middle of the next step."""
    predictor = getattr(getattr(strategy, "memory", None), "predictor", None)
    learned = getattr(predictor, "w_dense", None)
    if learned is None:
        return
    width = next((len(p.meta["features"]) for p in prompts if p.meta and p.meta.get("features") is not None), None)
    if width != len(learned):
        now = "no features" if width is None else f"features of {width} values"
        raise checkpoint.CheckpointError(
            f"{ckpt}: its difficulty predictor learned {len(learned)} feature weights, but the task's prompts now "
            f"have {now} (task.features_key): the features file changed since. Restore the file the run trained "
            "on, or start a new run"
        )
