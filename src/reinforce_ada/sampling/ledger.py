"""What both drivers share: scoring samples, turning a finished strategy into a training batch, the budget ledger.

`score` fills rewards with the task's verifier. A verifier that raises, returns a non-finite value or exceeds
`verifier_timeout_s` scores 0 and is counted (`verifier_errors`), never a crash: one bad completion must not lose a
step's sampling. Timeouts run the verifier on a daemon thread and abandon it when late (`reinforce_ada.timeouts`: a
thread cannot be killed, but an abandoned one never keeps the process from exiting; CPU-bound verifiers that need
hard limits belong in a process pool). `tasks.build` already bounds every verifier it returns.
`finish` builds the groups of a finished strategy, their advantages and weights, and completes the `Ledger`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from reinforce_ada import timeouts
from reinforce_ada.sampling.advantages import batch_normalize, compute_advantages, zero_advantage
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.types import Group, Prompt, Sample, as_reward

Verifier = Callable[[str, str], float]
PromptSource = Callable[[int], Sequence[Prompt]]


@dataclass
class Ledger:
    """Where one step's sampling budget went: every field is a key of each training line of `metrics.jsonl`, and its
    docstring is the key's definition in docs/metrics.md (`docgen.metrics_page`); `extra`'s keys join them flat."""

    prompts: int = 0
    """Prompts sampled in the step (DAPO refills included)."""
    samples_generated: int = 0
    """Completions the engine returned this step (cancelled ones never return; replayed answers are not counted)."""
    tokens_generated: int = 0
    """Completion tokens of those samples (prompt tokens not counted): the sampling bill."""
    prompt_tokens: int = 0
    """Prompt tokens of those samples, each sample counting its prompt once (an API's input bill; 0 where the
    engine does not know prompt lengths: the simulator); tokens_generated + prompt_tokens is the whole bill."""
    prefill_tokens: int = 0
    """Prompt tokens of the step's distinct sampled prompts, each once: what an engine that caches a prompt's prefix
    prefills (0 where the engine does not know prompt lengths)."""
    max_completion_tokens: int = 0
    """The longest completion that came back this step (in tokens), kept in a run's records. Samples cancelled in
    flight never come back, so they are not seen."""
    longest_per_round: list[int] = field(default_factory=list)
    """A list: the longest completion (tokens) that reached a pool in each round: a round's decode steps, which the
    GPU cost model prices from the samples' own lengths (`bench.costmodel.gpu_length_seconds`)."""
    samples_trained: int = 0
    """Samples the learner trained on, after downsampling and dropping (replayed answers included)."""
    tokens_trained: int = 0
    """Completion tokens of the trained samples (prompt tokens not counted): the learner's share of the bill."""
    prompts_trained: int = 0
    """Prompts with a group in the training batch."""
    zero_adv_prompts: int = 0
    """Trained prompts whose advantages are all zero."""
    zero_adv_prompt_share: float = 0.0
    """zero_adv_prompts / prompts_trained."""
    no_signal_prompt_share: float = 0.0
    """Prompts giving no gradient (zero advantage, dropped unresolved, DAPO zero-variance) / prompts sampled."""
    unresolved_prompts: int = 0
    """Prompts that stopped sampling without meeting the strategy's exit rule (seq: the cap reached or given up;
    conformal: no stopping budget by the grid's end); 0 for strategies without one."""
    dropped_prompts: int = 0
    """Sampled prompts left out of training: unresolved ones under unresolved=drop (seq), zero-variance groups
    (dynamic, greso)."""
    rounds: int = 0
    """Sampling rounds the step took: the last round any prompt sampled in (a further batch or a refill is one)."""
    active_prompts_per_round: list[int] = field(default_factory=list)
    """A list: for each round r, the prompts that sampled in round r and sample again in round r + 1."""
    samples_per_round: list[int] = field(default_factory=list)
    """Samples that reached a pool in each sequential round (by the strategy's round index; cancelled and discarded
    ones excluded, late `in_flight="keep"` arrivals counted in the last round): a round's decode rows."""
    reward_first_round: float = float("nan")
    """Mean over prompts of the first round's mean reward: an unbiased estimate of the policy's pass rate."""
    reward_trained: float = float("nan")
    """Mean reward of the trained samples."""
    verifier_errors: int = 0
    """Verifier calls that raised, returned a non-finite value or timed out (each scored 0)."""
    time_generate_s: float = 0.0
    """Wall seconds of the step's sampling: generation, scoring and the strategy's decisions."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Not a key: the strategy's, the admission stage's and the driver's own keys (each declared beside its code as
    `METRICS`), and the trainer's additions (replay, rollout workers, probes), merged flat by `as_metrics`."""

    def as_metrics(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


@dataclass
class StepBatch:
    """What one step of sampling returns (`collect`, `collect_streaming`): everything the learner trains on."""

    groups: list[Group]
    """One group per prompt trained on: its kept samples and every reward drawn for it."""
    advantages: list[np.ndarray]
    """Per group, one advantage per kept sample (the strategy's baseline and scaling applied)."""
    weights: np.ndarray
    """Per group, the prompt's weight in the loss (1, or e.g. Ada-Est's residual 1/sqrt(p))."""
    ledger: Ledger
    """Where the step's sampling budget went: samples and tokens drawn and trained, prompts without signal, rounds."""


def _call(verifier: Verifier, completion: str, answer: str, timeout_s: float | None) -> float:
    if timeout_s is None:
        value = verifier(completion, answer)
    else:
        value = timeouts.call(verifier, completion, answer, timeout_s=timeout_s)
    return as_reward(value)  # a real, finite number; anything else is a counted error


def score(
    samples: Sequence[Sample], prompts: dict[str, Prompt], verifier: Verifier | None, timeout_s: float | None = None
) -> int:
    """Fill missing rewards with the verifier; return how many verifier calls failed or timed out (scored 0)."""
    errors = 0
    for s in samples:
        if s.reward is not None:
            continue
        if verifier is None:
            raise ValueError("the engine returned unscored samples and no verifier was given")
        try:
            s.reward = _call(verifier, s.text, prompts[s.prompt_id].answer, timeout_s)
        except Exception:  # deliberate (TimeoutError included): a broken verifier costs one reward, not the step
            s.reward, errors = 0.0, errors + 1
        if not np.isfinite(s.reward):
            s.reward, errors = 0.0, errors + 1
    return errors


def finish(strategy: PoolStrategy, ledger: Ledger) -> StepBatch:
    """Build the training groups, their advantages and weights, and complete the ledger (round and streaming mode).
    The ledger counts signal before any batch normalisation (which shifts every advantage by a batch constant)."""
    groups = strategy.build()
    for g in groups:  # the value estimate from before this step's samples (advantage="tracker")
        g.baseline = strategy.values.get(g.prompt.id, g.baseline)
    advs, weights = step_advantages(strategy.opts, groups)
    fill_ledger(ledger, strategy, groups, advs)
    return StepBatch(groups, batch_normalize(groups, advs, strategy.opts.batch_normalize), weights, ledger)


def step_advantages(opts: Any, groups: Sequence[Group], *, eps: float = 1e-6) -> tuple[list[np.ndarray], np.ndarray]:
    """Every group's advantages and weights under the strategy's baseline options (before batch normalisation)."""
    return compute_advantages(
        groups,
        estimator=opts.advantage,
        std=opts.scale_std,
        correction=opts.correction,
        objective=opts.objective,
        alpha=opts.alpha,
        eps=eps,
    )


def rows_per_round(strategy: PoolStrategy, rounds: int) -> list[int]:
    """Samples in the strategy's pools per round 0..rounds-1."""
    out = [0] * rounds
    for pool in strategy.pools.values():
        for s in pool:
            out[min(s.round, rounds - 1)] += 1
    return out


def longest_per_round(strategy: PoolStrategy, rounds: int) -> list[int]:
    """The longest completion in the strategy's pools per round 0..rounds-1 (0 for a round with none)."""
    out = [0] * rounds
    for pool in strategy.pools.values():
        for s in pool:
            r = min(s.round, rounds - 1)
            out[r] = max(out[r], completion_tokens(s))
    return out


def completion_tokens(s: Sample) -> int:
    """A sample's completion length: the engine's count, else its token ids."""
    return s.num_tokens or len(s.token_ids)


def fill_ledger(ledger: Ledger, strategy: PoolStrategy, groups: Sequence[Group], advs: Sequence[np.ndarray]) -> None:
    m = strategy.metrics()
    ledger.prompts = len(strategy.prompts)
    ledger.rounds = m.pop("rounds")
    ledger.active_prompts_per_round = m.pop("active_prompts_per_round")
    ledger.samples_per_round = rows_per_round(strategy, ledger.rounds)
    ledger.longest_per_round = longest_per_round(strategy, ledger.rounds)
    ledger.unresolved_prompts = m.pop("unresolved_prompts", 0)
    ledger.dropped_prompts = m.pop("dropped_prompts", 0)
    ledger.extra = m
    ledger.prompts_trained = len(groups)
    ledger.samples_trained = sum(len(g.samples) for g in groups)
    ledger.tokens_trained = sum(completion_tokens(s) for g in groups for s in g.samples)
    ledger.zero_adv_prompts = sum(zero_advantage(a) for a in advs)
    ledger.zero_adv_prompt_share = ledger.zero_adv_prompts / max(1, len(groups))
    trained_with_signal = len(groups) - ledger.zero_adv_prompts
    # overflow prompts (DAPO groups with signal beyond the batch) are not counted as "no signal"
    sampled = max(1, ledger.prompts - m.get("overflow_prompts", 0))
    ledger.no_signal_prompt_share = 1.0 - trained_with_signal / sampled
    first = strategy.first_round_rewards()
    if first:
        ledger.reward_first_round = float(np.mean([np.mean(r) for r in first.values() if r]))
    kept = [r for g in groups for r in g.rewards]
    ledger.reward_trained = float(np.mean(kept)) if kept else float("nan")
