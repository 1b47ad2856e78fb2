"""TRL's reward functions scoring our samples, with our verifier contract: a raising function scores 0 and is counted.

1) Every reward function gets TRL's arguments: `prompts`, `completions`, `completion_ids`, one list per dataset
   column, `trainer_state`, `log_extra`, `log_metric` (and `environments` where TRL has them). Reward models
   (`nn.Module`) and async functions run as TRL runs them.
2) A function that raises on a batch is called again row by row; each row that still raises scores 0 and is counted
   (`errors`), as `sampling.ledger.score` does for our verifiers: one bad completion must not lose a step's sampling.
   A non-finite number is also 0 and counted. `None` means "not applicable" (TRL's multi-task convention): NaN here.
3) The reward is TRL's weighted sum over functions, NaN entries left out. A row for which every function returned
   None scores 0 and is counted. Departure from TRL, which leaves such rows out of the group baseline: our
   strategies need a number for every sample.
`log_extra` values are kept per row (`ExtraLog`) so the completions table can show the kept rows' values.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn


class ExtraLog:
    """Collects `log_extra(column, values)` calls for one scoring call of `n` rows (values start at `offset`)."""

    def __init__(self, n: int):
        self.n, self.offset = n, 0
        self.columns: dict[str, list[Any]] = {}

    def __call__(self, column: str, values: Sequence[Any]) -> None:
        col = self.columns.setdefault(column, [None] * self.n)
        for j, v in enumerate(list(values)[: self.n - self.offset]):
            col[self.offset + j] = v

    def row(self, j: int) -> dict[str, Any]:
        return {c: vals[j] for c, vals in self.columns.items()}


def _invoke(trainer: Any, fn: Any, kwargs: dict[str, Any]) -> list:
    from trl.trainer.utils import is_async_callable

    if is_async_callable(fn):  # TRL runs these on its own event loop
        return asyncio.run_coroutine_threadsafe(fn(**kwargs), trainer.async_loop).result()
    return fn(**kwargs)


def _number(value: Any) -> tuple[float, bool]:
    """(reward, failed): None -> NaN (not applicable); non-finite -> 0, failed."""
    if value is None:
        return math.nan, False
    x = float(value)
    return (x, False) if math.isfinite(x) else (0.0, True)


def _guarded(trainer: Any, fn: Any, name: str, kwargs: dict[str, Any], extra: ExtraLog) -> tuple[list[float], int]:
    n = len(kwargs["prompts"])
    try:
        out = list(_invoke(trainer, fn, kwargs))
    except Exception:  # deliberate: retried row by row below, so only the rows that fail score 0
        out = None
    if out is not None:
        if len(out) != n:
            raise ValueError(f"the reward function {name!r} returned {len(out)} rewards for {n} completions")
        pairs = [_number(v) for v in out]
        return [v for v, _ in pairs], sum(bad for _, bad in pairs)
    values, errors = [], 0
    for j in range(n):
        row = {k: (v[j : j + 1] if isinstance(v, list) and len(v) == n else v) for k, v in kwargs.items()}
        extra.offset = j
        try:
            (value,) = _invoke(trainer, fn, row)
            value, bad = _number(value)
        except Exception:  # deliberate: a broken reward costs this completion's reward, not the step
            value, bad = 0.0, True
        values.append(value)
        errors += bad
    extra.offset = 0
    return values, errors


def _model_rewards(trainer: Any, model: nn.Module, processing: Any, prompts: list, completions: list) -> list[float]:
    """A reward model scores prompt + completion, as TRL's `_calculate_rewards` does."""
    from trl.data_utils import apply_chat_template, is_conversational

    if is_conversational({"prompt": prompts[0]}):
        texts = [
            apply_chat_template({"messages": p + c}, processing, **trainer.chat_template_kwargs)["text"]
            for p, c in zip(prompts, completions, strict=True)
        ]
    else:
        texts = [p + c for p, c in zip(prompts, completions, strict=True)]
    enc = processing(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    enc = {k: v.to(trainer.accelerator.device) for k, v in enc.items()}
    with torch.inference_mode():
        return model(**enc).logits[:, 0].float().tolist()


def reward_table(
    trainer: Any, examples: list[dict], prompts: list, completions: list, completion_ids: list[list[int]]
) -> tuple[np.ndarray, np.ndarray, int, ExtraLog]:
    """Score rows with the trainer's reward functions: (per-function rewards (R, F) with NaN for None, the weighted
    reward per row (R,), failures counted, the log_extra values)."""
    n = len(prompts)
    extra = ExtraLog(n)
    columns = [k for k in examples[0] if k not in ("prompt", "completion", "completion_ids")] if examples else []
    kwargs: dict[str, Any] = {k: [ex[k] for ex in examples] for k in columns}
    kwargs.update(trainer_state=trainer.state, log_extra=extra, log_metric=trainer._log_metric)
    if getattr(trainer, "environments", None) is not None:
        kwargs["environments"] = trainer.environments
    table = np.full((n, len(trainer.reward_funcs)), np.nan)
    errors = 0
    funcs = zip(trainer.reward_funcs, trainer.reward_processing_classes, trainer.reward_func_names, strict=True)
    for i, (fn, processing, name) in enumerate(funcs):
        if isinstance(fn, nn.Module):
            table[:, i] = _model_rewards(trainer, fn, processing, prompts, completions)
            continue
        call = dict(kwargs, prompts=prompts, completions=completions, completion_ids=completion_ids)
        table[:, i], failed = _guarded(trainer, fn, name, call, extra)
        errors += failed
    weights = trainer.reward_weights.detach().cpu().numpy().astype(float)
    unscorable = np.isnan(table).all(axis=1)
    reward = np.where(unscorable, 0.0, np.nansum(table * weights, axis=1))
    return table, reward, errors + int(unscorable.sum()), extra
