"""The exact law of one visit of a sampler, per prompt pass rate: the planner's closed forms, in the sampling core.

`visit_law(cls, opts, rates)` gives, for each rate, the probability that one visit yields no signal, its expected
samples, its chance to end unresolved and its chance to be all correct / all wrong (GRESO's streak moves), by the
strategy class `cls`'s declared `traits.planner`: `group` and `allocation` (one batch of n or of the allocated
count), `pilot` (Pilot-Commit: pilot X ~ Bin(pilot, p), committed iff X / pilot is in the band) and `sequential` (any
seq rule, give_up included: a dynamic programme over the number of correct samples after each round); None for
`monte_carlo`.
`simulation.plan` builds the user-facing planner on it (selection, GRESO's stationary skip share, Monte Carlo), and
the admission rules price candidates with it (`ValueTable`, below) -- which is why it lives here: the core never
imports the simulator.
`exit_holds` and `resolve_chance` are Seq's exit rule and give-up chance (`strategies.seq` decides with them, the law
enumerates them). Pure: a strategy class and its options in, numbers out; this module imports no strategy.

The value table (`value_table(cls, opts)`: `select=value` and `select=iw` read it). For a candidate x with
pass-rate belief p ~ Beta(a, b) (`PromptMemory.posterior`, by `estimator`: the tracker's counts; with `both` the
learned predictor's mean is the prior, so a never-seen prompt has an informed belief; with `oracle` a Beta of
strength 1e6 on the exact rate) and expected completion length t(x) tokens per sample
(`PromptMemory.tokens_per_sample`: the prompt's length EMA, else the mean over all prompts, else 1 -- so before any
data the value is signal per sample):

    value(x) = E_p[P(signal | p)] / (E_p[E[samples | p]] * t(x)).

1) The law. P(signal | p) = 1 - zero_signal and E[samples | p] = expected_samples are the planner's exact rows
   (`visit_law`) for the strategy the selection sits in front of, on `GRID` pass rates 0, 1/(GRID-1),
   .., 1, computed once per strategy class and options (cached): planner `group` (uniform, dynamic: one batch of n,
   P(signal) = 1 - p^n - (1 - p)^n under a baseline from the group; 1 under `advantage=tracker`, whose value then
   ranks prompts by cost alone, except dynamic's, which drops agreeing groups), `sequential` (seq, give_up
   included: the exact enumeration) and `pilot` (pilot_commit: its pilot and band). These are the planner's laws
   with its assumptions: seq's give_up starts from
   a first visit's prior (a revisited prompt's rule reads its posterior). The table is built when the strategy is
   (seq with give_up at max_samples 256: about 3 s; the planner refuses max_samples > 1024).
   Fallback: a planner whose law depends on the whole batch (`allocation`: est and knapsack give a prompt samples
   according to every other prompt's estimate) or has no closed form (`monte_carlo`) is valued with the uniform law
   at n = opts.n -- the right ranking when the allocator's spend does not depend much on p, an approximation
   otherwise (`ValueTable.law` says which law is in use).
2) Integration over the Beta, per candidate, vectorised: a posterior narrower than `NARROW` grid cells (standard
   deviation) is valued by the delta method at its mean, f(m) + f''(m) var / 2, f linear between grid points (a
   point mass -- the oracle -- gets f(p) itself); a wider one by cell weights from the Beta's log-density at the
   cell midpoints, normalised in log space, where the two end cells take the exact integral of their singular
   factor (p^(a-1) on [0, h] is h^a / a), so a < 1 or b < 1 (a predictor prior near 0 or 1) is weighted right; each
   cell's value is f linear at the cell's conditional mean of p.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import comb, exp, lgamma
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.memory import oracle_prior, resolved_evict

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


def check_size(cls: Any, opts: Any) -> None:
    """Refuse a sampler whose visits can draw more than the planner answers for (`MAX_PLAN_SAMPLES`): the most
    samples a prompt can cost (`cls.cost_hint`), named by the option that sets it."""
    if cls.cost_hint(opts) > MAX_PLAN_SAMPLES:
        name = "max_samples" if hasattr(opts, "max_samples") else "n"
        raise ConfigError(
            f"{name}={getattr(opts, name)} is past the planner's limit: its binomial laws overflow a float past "
            f"about 1,029 draws; the largest allowed value is {MAX_PLAN_SAMPLES}"
        )


def exit_holds(n_pos: int, n_neg: int, *, exit: str, k_pos: int, k_neg: int) -> bool:
    """Seq's exit rule: `positive` needs k_pos correct samples, `balanced` k_pos correct and k_neg wrong."""
    if exit == "positive":
        return n_pos >= k_pos
    return n_pos >= k_pos and n_neg >= k_neg


def resolve_chance(n_pos: int, n_neg: int, remaining: int, a: float, b: float, *, k_pos: int, k_neg: int) -> float:
    """P(the next `remaining` samples bring >= k_pos - n_pos correct and >= k_neg - n_neg wrong) when the pass rate
    is Beta(a + n_pos, b + n_neg) distributed (a Beta-binomial tail; k_neg = 0 for the positive exit)."""
    need_pos, need_neg = max(0, k_pos - n_pos), max(0, k_neg - n_neg)
    if need_pos + need_neg > remaining:
        return 0.0
    a, b, r = a + n_pos, b + n_neg, remaining
    log_beta_ab = lgamma(a) + lgamma(b) - lgamma(a + b)
    total = 0.0
    for j in range(need_pos, r - need_neg + 1):
        log_comb = lgamma(r + 1) - lgamma(j + 1) - lgamma(r - j + 1)
        total += exp(log_comb + lgamma(j + a) + lgamma(r - j + b) - lgamma(r + a + b) - log_beta_ab)
    return min(1.0, total)


def check_rates(rates: Sequence[float]) -> np.ndarray:
    r = np.asarray(rates, dtype=float)
    if r.ndim != 1 or len(r) == 0:
        raise ConfigError("pass rates must be a non-empty list of numbers")
    for i, p in enumerate(r):
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"pass rate #{i} = {p} is outside [0, 1]")
    return r


ONE_SAMPLE_SILENT = {
    "group": ("group", "maxrl", "leave_one_out", "corrected", "global"),
    "sequential": ("group", "maxrl", "leave_one_out"),
}
"""By `Traits.planner`, the baselines under which a kept group of n = 1 has no signal. A strategy that draws exactly
n (`group`) trains its whole pool, so `global` and `corrected` read that one sample too; Seq keeps n of a larger
pool, which `global` and `corrected` read (a kept positive of a mixed pool has signal). The allocators (est,
knapsack), pilot_commit and conformal train what they allocate, not n: no rule."""


def outside_baseline(c: Any) -> bool:
    """Whether the baseline comes from outside the prompt's samples (`advantage="tracker"`, SPO's value estimate from
    before the step): a trained prompt then has signal whatever its rewards, unless the estimate equals them."""
    return c.advantage == "tracker"


def _tracker_zero(p: float, c: Any) -> float:
    """P(no signal) of a trained visit under the tracker baseline: every reward equals v_hat. The tracker's and the
    other estimators' values stay inside (0, 1) (a Beta prior with positive counts); `estimator=oracle` sets v_hat = p,
    so a prompt at p = 0 or 1 gives none."""
    return 1.0 if c.estimator == "oracle" and p in (0.0, 1.0) else 0.0


def uniform_zero(p: float, n: int, c: Any = None) -> float:
    """P(no signal) of a group of n under options `c`: all rewards equal under a baseline from the group (or with no
    options: a strategy that drops such groups); under the tracker's, only an untrained prompt (n = 0) or v_hat equal
    to every reward (`_tracker_zero`)."""
    if c is not None and outside_baseline(c):
        return 1.0 if n < 1 else _tracker_zero(p, c)
    return 1.0 if n < 2 else p**n + (1 - p) ** n


def _one_batch(p: float, n: int, c: Any = None, method: str = "closed_form") -> Visit:
    return Visit(PlanRow(p, uniform_zero(p, n, c), float(n), None, method), p**n, (1 - p) ** n)


def _binom(k: int, p: float) -> list[float]:
    return [comb(k, j) * p**j * (1 - p) ** (k - j) for j in range(k + 1)]


def _seq_exact(p: float, c: Any) -> Visit:
    k_pos, k_neg = c.resolved_k_pos, c.resolved_k_neg
    # give_up's prior on a first visit; estimator=oracle knows p (the memory's Beta concentrated on it)
    a0, b0 = oracle_prior(p) if c.estimator == "oracle" else (c.prior_alpha, c.prior_beta)
    active = {0: 1.0}  # correct count -> probability of being still active with that count
    ended: dict[tuple[int, int], float] = {}  # unresolved pools (cap or given up): (correct, drawn) -> probability
    drawn, zero, expected, right, wrong = 0, 0.0, 0.0, 0.0, 0.0
    tracked = outside_baseline(c)  # a kept pool has signal whatever its rewards (zero only when dropped)
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
                zero += mass if pos in (0, drawn) and not tracked else 0.0
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
        if c.unresolved == "drop" or (pos in (0, n) and not tracked):
            zero += m
    closed = c.exit == "positive" and k_pos == 1 and c.max_samples % c.samples_per_round == 0 and c.give_up == 0
    if closed:  # the textbook form, identical to the enumeration: a pool is uniform iff round 0 is all correct
        m, rounds = c.samples_per_round, c.max_samples // c.samples_per_round  # or every sample is wrong
        unresolved = (1 - p) ** (rounds * m)
        expected = m * sum((1 - p) ** (r * m) for r in range(rounds))
        zero = min(1.0, p**m + unresolved) if not tracked else unresolved if c.unresolved == "drop" else 0.0
    if c.advantage in ONE_SAMPLE_SILENT["sequential"] and c.n < 2:
        zero = 1.0  # a kept group of one sample is its own baseline (leave-one-out: it has no other)
    if tracked and zero < 1.0:
        zero += (1.0 - zero) * _tracker_zero(p, c)
    method = "closed_form" if closed else "exact_enumeration"
    return Visit(PlanRow(p, float(zero), float(expected), float(unresolved), method), right, wrong)


def _pilot_commit(p: float, c: Any) -> Visit:
    k, extra, evict = c.pilot, c.max_samples - c.pilot, resolved_evict(c)
    zero = right = wrong = committed = evicted = 0.0
    more = _binom(extra, p)  # the commit batch's correct count (a single 1.0 when there is none)
    for x, px in enumerate(_binom(k, p)):
        if c.commit_lo <= x / k <= c.commit_hi:  # committed: trained on pilot + commit, uniform only if both are
            committed += px
            right += px * more[-1] if x == k else 0.0
            wrong += px * more[0] if x == 0 else 0.0
            zero += px * _tracker_zero(p, c) if outside_baseline(c) else 0.0
            if evict is not None:
                evicted += px * sum(py for y, py in enumerate(more) if (x + y) / c.max_samples >= evict)
        else:  # deferred or too easy: not trained
            zero += px
            right += px if x == k else 0.0
            wrong += px if x == 0 else 0.0
            evicted += px if evict is not None and x / k >= evict else 0.0
    zero += sum(  # committed pools all correct or all wrong: no signal under a baseline from the pool
        px * (more[-1] if x == k else more[0])
        for x, px in enumerate(_binom(k, p))
        if x in (0, k) and c.commit_lo <= x / k <= c.commit_hi and not outside_baseline(c)
    )
    row = PlanRow(p, float(zero), k + committed * extra, None, "closed_form")
    row.evicted = float(evicted) if evict is not None else None
    return Visit(row, right, wrong)


def visit_law(cls: Any, opts: Any, r: np.ndarray) -> list[Visit] | None:
    """The sampler `cls`'s law for one visit at each rate (no selection) under its options `opts`, by the class's
    declared planner; None for planner="monte_carlo" (no closed form)."""
    planner = cls.traits.planner
    if planner == "group":  # a strategy that drops agreeing groups loses them whatever the baseline: no options
        law_opts = None if cls.traits.drops_uniform else opts
        return [_one_batch(float(p), opts.n, law_opts) for p in r]
    if planner == "allocation":
        budget = opts.budget if opts.budget is not None else 8 * len(r)
        counts = cls.plan_counts(r, opts, budget)
        return [_one_batch(float(p), int(k), opts) for p, k in zip(r, counts, strict=True)]
    if planner == "pilot":
        return [_pilot_commit(float(p), opts) for p in r]
    if planner == "sequential":
        return [_seq_exact(float(p), opts) for p in r]
    return None


GRID = 513
"""Pass rates in the value table (spacing 1/512: the linear interpolation error of a uniform-n law is below 1e-5)."""
NARROW = 2.0
"""A posterior whose standard deviation is below this many grid cells is valued by the delta method at its mean."""
EXACT_PLANNERS = ("group", "sequential", "pilot")
"""Planner kinds whose per-visit law at one p is exact and independent of the other prompts."""


@dataclass(frozen=True)
class ValueTable:
    """The per-visit law of one sampler and options on the grid `p` (module docstring, 1)."""

    p: np.ndarray
    signal: np.ndarray
    """P(signal | p)."""
    samples: np.ndarray
    """E[samples drawn in the visit | p] (>= 1)."""
    law: str
    """`plan:<planner>` (exact) or `uniform:n=<n>` (the fallback for allocation and monte_carlo planners)."""

    @property
    def h(self) -> float:
        return float(self.p[1] - self.p[0])

    def at(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(signal | p), E[samples | p]) at arbitrary rates, linear between grid points."""
        return np.interp(p, self.p, self.signal), np.interp(p, self.p, self.samples)

    def expect(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(E[P(signal | p)], E[E[samples | p]]) for p ~ Beta(a, b), one pair per candidate (module docstring, 2)."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        s = a + b
        mean = a / s
        var = a * b / (s * s * (s + 1.0))
        narrow = np.sqrt(var) < NARROW * self.h
        sig, smp = np.empty_like(mean), np.empty_like(mean)
        if narrow.any():  # the delta method: E f(p) = f(m) + f''(m) var / 2
            m, v = mean[narrow], var[narrow]
            for out, f in ((sig, self.signal), (smp, self.samples)):
                out[narrow] = np.interp(m, self.p, f) + 0.5 * v * np.interp(m, self.p, _second(f, self.h))
        wide = ~narrow
        if wide.any():
            sig[wide], smp[wide] = self._cells(a[wide], b[wide])
        return np.clip(sig, 0.0, 1.0), np.maximum(smp, 1e-12)

    def _cells(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h, x = self.h, self.p
        mid = (x[:-1] + x[1:]) / 2
        lo, hi = np.log(mid), np.log1p(-mid)
        logw = (a - 1)[:, None] * lo[None, :] + (b - 1)[:, None] * hi[None, :] + np.log(h)  # (C, cells)
        logw[:, 0] = (b - 1) * hi[0] + a * np.log(h) - np.log(a)  # exact integral of p^(a-1) on the first cell
        logw[:, -1] = (a - 1) * lo[-1] + b * np.log(h) - np.log(b)  # ... and of (1-p)^(b-1) on the last
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        out = []
        for f in (self.signal, self.samples):
            cell = np.broadcast_to((f[:-1] + f[1:]) / 2, w.shape).copy()  # f at an interior cell's mean: its midpoint
            cell[:, 0] = f[0] + a / (a + 1) * (f[1] - f[0])  # E[p | first cell] = h a / (a + 1) for p^(a-1)
            cell[:, -1] = f[-1] + b / (b + 1) * (f[-2] - f[-1])
            out.append((w * cell).sum(axis=1))
        return out[0], out[1]


def _second(f: np.ndarray, h: float) -> np.ndarray:
    """Second differences of f on the grid (the end points take their neighbour's)."""
    d2 = np.empty_like(f)
    d2[1:-1] = (f[:-2] - 2 * f[1:-1] + f[2:]) / (h * h)
    d2[0], d2[-1] = d2[1], d2[-2]
    return d2


@lru_cache(maxsize=64)
def value_table(cls: Any, opts: Any) -> ValueTable:
    """The value table of the sampler `cls` under its options `opts`, built once per configuration."""
    p = np.linspace(0.0, 1.0, GRID)
    planner = cls.traits.planner
    if planner in EXACT_PLANNERS:
        check_size(cls, opts)
        rows = [v.row for v in visit_law(cls, opts, p)]
        signal = np.array([1.0 - r.zero_signal for r in rows])
        samples = np.array([r.expected_samples for r in rows])
        law = f"plan:{planner}"
    else:  # allocation / monte_carlo: the uniform law at n (module docstring, 1)
        n = opts.n
        signal = 1.0 - np.array([uniform_zero(float(x), n, opts) for x in p])
        samples = np.full_like(p, float(n))
        law = f"uniform:n={n}"
    for arr in (p, signal, samples):
        arr.setflags(write=False)
    return ValueTable(p, np.clip(signal, 0.0, 1.0), np.maximum(samples, 1.0), law)
