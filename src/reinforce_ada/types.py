"""Typed records that move through the pipeline.

A step reads: prompts -> requests (prompt, k) -> samples (scored) -> groups (kept samples + the whole pool) ->
advantages and per-prompt weights -> loss. Every stage passes these records, never dicts of anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """One training or evaluation prompt."""

    id: str
    """Stable key: trackers and checkpoints refer to prompts by it."""
    text: str
    """What the policy is conditioned on (already templated)."""
    answer: str = ""
    """Reference answer handed to the verifier."""
    level: int | None = None
    """Difficulty level, where the task defines one (reports break accuracy down by it)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Request:
    """Ask an engine for `k` independent completions of `prompt`."""

    prompt: Prompt
    k: int
    max_tokens: int | None = None
    """This request's own cap on a completion (a length lever, `sampling.length`), below the engine's
    `max_new_tokens`; None: the engine's. A completion stopped by it ends with finish_reason "length"."""


@dataclass
class Sample:
    """One completion. Engines fill the generation fields; the verifier (or a simulated engine) fills `reward`."""

    prompt_id: str
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    """Completion token ids (prompt excluded)."""
    logprobs: list[float] = field(default_factory=list)
    """The sampler's log-prob of each completion token (same length as `token_ids`)."""
    num_tokens: int = 0
    """Completion length in tokens (== len(token_ids) for real engines; simulated engines set it directly)."""
    finish_reason: str = ""
    """`eos`, `stop` (a stop string), `length` (max new tokens) or `cancelled`."""
    reward: float | None = None
    round: int = 0
    """Sampling round the sample was drawn in (0-based)."""
    index: int = 0
    """Arrival order within the prompt's pool for this step (0-based)."""
    policy_version: int | None = None
    """Learner updates applied to the weights that drew it (set by Ray rollout workers; None in-process)."""
    replayed_from: int | None = None
    """Set by `training.replay` on a stored earlier answer trained in a later step: the step it was generated at."""
    prompt_tokens: int = 0
    """The prompt's length in tokens, as the engine encoded it (0 where an engine does not know it: the simulator)."""


@dataclass
class Group:
    """What one prompt contributes to a training step."""

    prompt: Prompt
    samples: list[Sample]
    """The samples trained on (after any downsampling)."""
    pool_rewards: list[float]
    """Every reward drawn for this prompt in this step, kept ones included (the global baseline uses it)."""
    weight: float = 1.0
    """Per-prompt weight from the strategy (e.g. Ada-Est's residual 1/sqrt(p))."""
    resolved: bool = True
    """False when the prompt reached its sample cap without meeting its exit rule."""
    baseline: float | None = None
    """The prompt's value estimate before this step's samples, from the strategy's prompt memory (set for
    `advantage="tracker"`): a baseline that does not depend on the samples it scores."""

    @property
    def rewards(self) -> list[float]:
        return [float(s.reward) for s in self.samples]  # type: ignore[arg-type]


REWARD_TYPES = "an int, float or bool (or another numbers.Real scalar, numpy's included), finite"


def as_reward(value: Any, error: type[Exception] = TypeError) -> float:
    """A verifier's return value as a reward, or `error` naming its type: the one rule every verifier path uses.

    >>> as_reward(True), as_reward(3), as_reward(0.5)
    (1.0, 3.0, 0.5)
    """
    import math
    import numbers

    import numpy as np

    if isinstance(value, str | bytes) or not isinstance(value, numbers.Real | np.bool_):
        raise error(f"the verifier returned a {type(value).__name__} ({value!r:.60}); a reward must be {REWARD_TYPES}")
    try:
        reward = float(value)
    except Exception as e:  # deliberate: a Real whose __float__ fails is the verifier's error, not the run's
        raise error(f"the verifier returned a {type(value).__name__} that float() refuses: {e}") from None
    if not math.isfinite(reward):
        raise error(f"the verifier returned {reward}; a reward must be {REWARD_TYPES}")
    return reward
