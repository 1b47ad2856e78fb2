"""TRL's reward functions scoring our samples, with our verifier contract: a raising function scores 0 and is counted.

1) Every reward function gets TRL's arguments: `prompts`, `completions`, `completion_ids`, one list per dataset
   column, `trainer_state`, `log_extra`, `log_metric` (and `environments` where TRL has them). Reward models
   (`nn.Module`) and async functions run as TRL runs them.
2) A function that raises on a batch is called again row by row; each row that still raises scores 0 and is counted
   (`errors`), as `sampling.ledger.score` does for our verifiers: one bad completion must not lose a step's sampling.
   That includes KeyboardInterrupt and SystemExit raised by the function; a real Ctrl-C (SIGINT while it runs, seen
   by a handler installed for the call) still stops the run.
   A NaN or infinite reward is also 0 and counted. `None` means "not applicable" (TRL's multi-task convention): NaN
   here. `errors` counts rows (completions), not function calls: a row is counted once however many functions failed.
3) What a reward function may return: a real number (bool, int, float, a numpy scalar or one-element tensor) or
   None. Text, dicts, complex numbers and numbers TRL cannot hold (it keeps rewards as float32: |x| <= 3.4e38) are a
   bug in the function, not a failed verification: a `ConfigError` names the function, the row and the value. So is
   a weighted sum that overflows (`reward_weights` are checked finite when the config is built).
4) The reward is TRL's weighted sum over functions, NaN entries left out. A row for which every function returned
   None scores 0 and is counted. Departure from TRL, which leaves such rows out of the group baseline: our
   strategies need a number for every sample.
`log_extra` values are kept per row (`ExtraLog`) so the completions table can show the kept rows' values.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from reinforce_ada.errors import ConfigError

FLOAT32_MAX = float(np.finfo(np.float32).max)
VALID = "a finite real number of magnitude <= 3.4e38 (TRL keeps rewards as float32) or None (not applicable)"


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


def _number(value: Any, name: str, row: int) -> tuple[float, bool]:
    """(reward, failed): None -> NaN (not applicable); NaN or infinite -> 0, failed; anything else that is not a real
    number TRL can hold -> ConfigError naming the function, the row and the value."""
    if value is None:
        return math.nan, False
    one_element = (isinstance(value, np.ndarray) and value.size == 1) or (
        isinstance(value, torch.Tensor) and value.numel() == 1
    )
    if isinstance(value, np.generic) or one_element:
        value = value.item()  # a numpy scalar or a one-element array or tensor
    if not isinstance(value, numbers.Real):
        raise ConfigError(
            f"the reward function {name!r} returned {value!r} ({type(value).__name__}) for row {row}: "
            f"a reward must be {VALID}"
        )
    try:
        x = float(value)
    except OverflowError:  # an int such as 10**400: a real number no float holds
        raise ConfigError(
            f"the reward function {name!r} returned an integer of {len(str(abs(int(value))))} digits for row {row}: "
            f"a reward must be {VALID}"
        ) from None
    if not math.isfinite(x):
        return 0.0, True
    if abs(x) > FLOAT32_MAX:
        raise ConfigError(f"the reward function {name!r} returned {x!r} for row {row}: a reward must be {VALID}")
    return x, False


@contextmanager
def _user_interrupt() -> Iterator[list[bool]]:
    """Tell a real Ctrl-C from a reward function that raises KeyboardInterrupt itself: while the function runs, a
    SIGINT sets the flag and then does what the handler before did (raise KeyboardInterrupt, by default)."""
    seen = [False]
    if threading.current_thread() is not threading.main_thread():  # signal handlers live on the main thread only
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        seen[0] = True
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _call(trainer: Any, fn: Any, kwargs: dict[str, Any]) -> Any:
    """`fn(**kwargs)`, or `_FAILED` when it raised anything (KeyboardInterrupt and SystemExit included, as our
    verifier contract) -- except a real Ctrl-C, which stops the run as it should."""
    with _user_interrupt() as interrupted:
        try:
            return _invoke(trainer, fn, kwargs)
        except (Exception, KeyboardInterrupt, SystemExit) as e:  # deliberate: a broken reward costs its rows
            if isinstance(e, KeyboardInterrupt) and interrupted[0]:
                raise
            return _FAILED


_FAILED = object()


def _guarded(
    trainer: Any, fn: Any, name: str, kwargs: dict[str, Any], extra: ExtraLog
) -> tuple[list[float], list[bool]]:
    """(rewards, failed per row)."""
    n = len(kwargs["prompts"])
    out = _call(trainer, fn, kwargs)  # on failure: retried row by row below, so only the rows that fail score 0
    out = None if out is _FAILED else list(out)
    if out is not None:
        if len(out) != n:
            raise ValueError(f"the reward function {name!r} returned {len(out)} rewards for {n} completions")
        pairs = [_number(v, name, j) for j, v in enumerate(out)]
        return [v for v, _ in pairs], [bad for _, bad in pairs]
    values, failed = [], []
    for j in range(n):
        row = {k: (v[j : j + 1] if isinstance(v, list) and len(v) == n else v) for k, v in kwargs.items()}
        extra.offset = j
        got = _call(trainer, fn, row)
        got = got if got is _FAILED else list(got)
        if got is _FAILED or len(got) != 1:  # a broken reward costs this completion's reward, not the step
            values.append(0.0), failed.append(True)
            continue
        (value,) = got
        value, bad = _number(value, name, j)
        values.append(value), failed.append(bad)
    extra.offset = 0
    return values, failed


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
    reward per row (R,), rows that failed (a function failed on them, or every function returned None), the log_extra
    values)."""
    n = len(prompts)
    extra = ExtraLog(n)
    columns = [k for k in examples[0] if k not in ("prompt", "completion", "completion_ids")] if examples else []
    kwargs: dict[str, Any] = {k: [ex[k] for ex in examples] for k in columns}
    kwargs.update(trainer_state=trainer.state, log_extra=extra, log_metric=trainer._log_metric)
    if getattr(trainer, "environments", None) is not None:
        kwargs["environments"] = trainer.environments
    table = np.full((n, len(trainer.reward_funcs)), np.nan)
    failed = np.zeros(n, dtype=bool)
    funcs = zip(trainer.reward_funcs, trainer.reward_processing_classes, trainer.reward_func_names, strict=True)
    for i, (fn, processing, name) in enumerate(funcs):
        if isinstance(fn, nn.Module):
            table[:, i] = _model_rewards(trainer, fn, processing, prompts, completions)
            continue
        call = dict(kwargs, prompts=prompts, completions=completions, completion_ids=completion_ids)
        table[:, i], bad = _guarded(trainer, fn, name, call, extra)
        failed |= np.asarray(bad, dtype=bool)
    weights = trainer.reward_weights.detach().cpu().numpy().astype(float)
    unscorable = np.isnan(table).all(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        reward = np.where(unscorable, 0.0, np.nansum(table * weights, axis=1))
    overflow = np.flatnonzero(~np.isfinite(reward) | (np.abs(reward) > FLOAT32_MAX))
    if overflow.size:
        j = int(overflow[0])
        raise ConfigError(
            f"row {j}: the weighted reward sum(reward_weights * rewards) = {reward[j]!r} overflows (rewards "
            f"{dict(zip(trainer.reward_func_names, table[j].tolist(), strict=True))}, reward_weights "
            f"{weights.tolist()}): rewards and weights must keep it a finite number of magnitude <= 3.4e38"
        )
    return table, reward, int((failed | unscorable).sum()), extra
