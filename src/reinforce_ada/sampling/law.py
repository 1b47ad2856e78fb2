"""The exact law of one visit of a sampler, per prompt pass rate: the planner's closed forms, in the sampling core.

`visit_law(cfg, rates)` gives, for each rate, the probability that one visit yields no signal, its expected samples,
its chance to end unresolved and its chance to be all correct / all wrong (GRESO's streak moves), by the strategy
class's declared `traits.planner`: `group` and `allocation` (one batch of n or of the allocated count), `pilot`
(Pilot-Commit: pilot X ~ Bin(pilot, p), committed iff X / pilot is in the band) and `sequential` (any seq rule, give_up
included: a dynamic programme over the number of correct samples after each round); None for `monte_carlo`.
`simulation.plan` builds the user-facing planner on it (selection, GRESO's stationary skip share, Monte Carlo), and
`sampling.value` prices candidates with it -- which is why it lives here: the core never imports the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.memory import oracle_prior
from reinforce_ada.sampling.strategies import strategy_class
from reinforce_ada.sampling.strategies.select import Greso
from reinforce_ada.sampling.strategies.seq import exit_holds, resolve_chance

MAX_PLAN_SAMPLES = 1024
"""Largest max_samples the planner answers for (module docstring); the paper's caps are 32 to 256."""


@dataclass
class PlanRow:
    p: float
    zero_signal: float
    expected_samples: float
    unresolved: float | None
    method: str
    stderr: float | None = None
    """Monte-Carlo standard error of zero_signal (None for exact methods)."""
    skipped: float | None = None
    """GRESO: long-run share of the prompt's offers skipped before any rollout."""
    evicted: float | None = None
    """Eviction: probability that one visit evicts the prompt for good."""


@dataclass
class Visit:
    """One visit's law: the plan row plus the chance its pool is all correct / all wrong (GRESO's streak moves)."""

    row: PlanRow
    all_correct: float
    all_wrong: float


def check_size(cfg: StrategyConfig) -> None:
    """Refuse a max_samples the planner cannot answer for (`MAX_PLAN_SAMPLES`, module docstring)."""
    if cfg.max_samples > MAX_PLAN_SAMPLES:
        raise ConfigError(
            f"max_samples={cfg.max_samples} is past the planner's limit: its binomial laws overflow a float past "
            f"about 1,029 draws; the largest allowed value is {MAX_PLAN_SAMPLES}"
        )


def check_rates(rates: Sequence[float]) -> np.ndarray:
    r = np.asarray(rates, dtype=float)
    if r.ndim != 1 or len(r) == 0:
        raise ConfigError("pass rates must be a non-empty list of numbers")
    for i, p in enumerate(r):
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"pass rate #{i} = {p} is outside [0, 1]")
    return r


def _uniform_zero(p: float, n: int) -> float:
    return 1.0 if n < 2 else p**n + (1 - p) ** n


def _one_batch(p: float, n: int, method: str = "closed_form") -> Visit:
    return Visit(PlanRow(p, _uniform_zero(p, n), float(n), None, method), p**n, (1 - p) ** n)


def _binom(k: int, p: float) -> list[float]:
    return [comb(k, j) * p**j * (1 - p) ** (k - j) for j in range(k + 1)]


def _seq_exact(p: float, c: StrategyConfig) -> Visit:
    k_pos, k_neg = c.resolved_k_pos, c.resolved_k_neg
    # give_up's prior on a first visit; estimator=oracle knows p (the memory's Beta concentrated on it)
    a0, b0 = oracle_prior(p) if c.estimator == "oracle" else (c.prior_alpha, c.prior_beta)
    active = {0: 1.0}  # correct count -> probability of being still active with that count
    ended: dict[tuple[int, int], float] = {}  # unresolved pools (cap or given up): (correct, drawn) -> probability
    drawn, zero, expected, right, wrong = 0, 0.0, 0.0, 0.0, 0.0
    while active:
        k = min(c.samples_per_round, c.max_samples - drawn)
        expected += k * sum(active.values())
        drawn += k
        nxt: dict[int, float] = {}
        for pos, mass in active.items():
            for j in range(k + 1):
                q = mass * comb(k, j) * p**j * (1 - p) ** (k - j)
                if q:
                    nxt[pos + j] = nxt.get(pos + j, 0.0) + q
        active = {}
        for pos, mass in nxt.items():
            if exit_holds(pos, drawn - pos, exit=c.exit, k_pos=k_pos, k_neg=k_neg):
                zero += mass if pos in (0, drawn) else 0.0
                right += mass if pos == drawn else 0.0
                wrong += mass if pos == 0 else 0.0
            elif drawn >= c.max_samples or (
                c.give_up > 0
                and resolve_chance(pos, drawn - pos, c.max_samples - drawn, a0, b0, k_pos=k_pos, k_neg=k_neg)
                < c.give_up
            ):
                ended[pos, drawn] = ended.get((pos, drawn), 0.0) + mass
            else:
                active[pos] = mass
    unresolved = sum(ended.values())
    for (pos, n), m in ended.items():
        right += m if pos == n else 0.0
        wrong += m if pos == 0 else 0.0
        if c.unresolved == "drop" or pos in (0, n):
            zero += m
    closed = c.exit == "positive" and k_pos == 1 and c.max_samples % c.samples_per_round == 0 and c.give_up == 0
    if closed:  # the textbook form, identical to the enumeration: a pool is uniform iff round 0 is all correct
        m, rounds = c.samples_per_round, c.max_samples // c.samples_per_round  # or every sample is wrong
        unresolved = (1 - p) ** (rounds * m)
        expected = m * sum((1 - p) ** (r * m) for r in range(rounds))
        zero = min(1.0, p**m + unresolved)
    if c.resolved_advantage in ("group", "maxrl") and c.n < 2:
        zero = 1.0  # a kept group of one sample is its own baseline
    method = "closed_form" if closed else "exact_enumeration"
    return Visit(PlanRow(p, float(zero), float(expected), float(unresolved), method), right, wrong)


def _pilot_commit(p: float, c: StrategyConfig) -> Visit:
    k, extra, evict = c.pilot, c.max_samples - c.pilot, c.resolved_evict
    zero = right = wrong = committed = evicted = 0.0
    more = _binom(extra, p)  # the commit batch's correct count (a single 1.0 when there is none)
    for x, px in enumerate(_binom(k, p)):
        if c.commit_lo <= x / k <= c.commit_hi:  # committed: trained on pilot + commit, uniform only if both are
            committed += px
            right += px * more[-1] if x == k else 0.0
            wrong += px * more[0] if x == 0 else 0.0
            if evict is not None:
                evicted += px * sum(py for y, py in enumerate(more) if (x + y) / c.max_samples >= evict)
        else:  # deferred or too easy: not trained
            zero += px
            right += px if x == k else 0.0
            wrong += px if x == 0 else 0.0
            evicted += px if evict is not None and x / k >= evict else 0.0
    zero += sum(
        px * (more[-1] if x == k else more[0])
        for x, px in enumerate(_binom(k, p))
        if x in (0, k) and c.commit_lo <= x / k <= c.commit_hi
    )
    row = PlanRow(p, float(zero), k + committed * extra, None, "closed_form")
    row.evicted = float(evicted) if evict is not None else None
    return Visit(row, right, wrong)


def visit_law(cfg: StrategyConfig, r: np.ndarray) -> list[Visit] | None:
    """The base sampler's law for one visit at each rate (no selection), by the class's declared planner; None for
    planner="monte_carlo" (no closed form)."""
    cls = strategy_class(cfg.name)
    planner = cls.traits.planner
    if planner == "group":
        return [_one_batch(float(p), cfg.n) for p in r]
    if planner == "allocation":
        budget = cfg.budget if cfg.budget is not None else 8 * len(r)
        counts = cls.plan_counts(r, cfg, budget)
        return [_one_batch(float(p), int(k)) for p, k in zip(r, counts, strict=True)]
    if planner == "pilot":
        return [_pilot_commit(float(p), cfg) for p in r]
    if planner == "sequential":
        return [_seq_exact(float(p), cfg) for p in r]
    return None


def greso_skip_share(all_correct: float, all_wrong: float, *, p_easy: float = 0.5, p_hard: float = 0.5) -> float:
    """Long-run share of a prompt's offers that GRESO skips, with fixed exploration probabilities.

    The state is the zero-variance streak s (+c: c all-correct visits in a row, -c: all wrong, 0: the last visit
    had both); an offer keeps the prompt with probability max(p^|s|, 0.01) and a kept visit moves s by the visit's
    outcome. Streaks beyond the floor behave alike, so they are merged.
    """
    depth = 1
    while max(p_easy, p_hard) ** depth > Greso.FLOOR:
        depth += 1
    states = list(range(-depth, depth + 1))
    at = {s: i for i, s in enumerate(states)}

    def keep(s: int) -> float:
        return 1.0 if s == 0 else max((p_easy if s > 0 else p_hard) ** abs(s), Greso.FLOOR)

    mixed = 1.0 - all_correct - all_wrong
    t_SS = np.zeros((len(states), len(states)))
    for s in states:
        kp = keep(s)
        t_SS[at[s], at[s]] += 1 - kp
        t_SS[at[s], at[min(s + 1, depth) if s > 0 else 1]] += kp * all_correct
        t_SS[at[s], at[max(s - 1, -depth) if s < 0 else -1]] += kp * all_wrong
        t_SS[at[s], at[0]] += kp * mixed
    # stationary distribution: pi (T - I) = 0, sum pi = 1
    a = np.vstack([(t_SS - np.eye(len(states))).T, np.ones(len(states))])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(len(states)), 1.0], rcond=None)[0]
    return float(1.0 - sum(pi[at[s]] * keep(s) for s in states))
