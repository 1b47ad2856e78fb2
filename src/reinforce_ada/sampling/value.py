"""`select=value`: admit the candidate prompts whose next visit buys the most expected signal per generated token.

For a candidate x with pass-rate belief p ~ Beta(a, b) (`PromptMemory.posterior`, by `estimator`: the tracker's
counts; with `both` the learned predictor's mean is the prior, so a never-seen prompt has an informed belief; with
`oracle` a Beta of strength 1e6 on the exact rate) and expected completion length t(x) tokens per sample
(`PromptMemory.tokens_per_sample`: the prompt's length EMA, else the mean over all prompts, else 1 -- so before any
data the value is signal per sample):

    value(x) = E_p[P(signal | p)] / (E_p[E[samples | p]] * t(x)).

1) The law. P(signal | p) = 1 - zero_signal and E[samples | p] = expected_samples are the planner's exact rows
   (`sampling.law.visit_law`) for the strategy the selection sits in front of, on `GRID` pass rates 0, 1/(GRID-1),
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
3) Selection (`value_choose`): the k candidates of highest value, ties by candidate order, from `candidates` x k
   candidates (MoPPS's field), as the `Admission` mixin collects them; unselected candidates wait for the source.
4) Exploration: `select_explore` = e in [0, 1]. Each candidate, with probability e, is valued at a Thompson draw
   theta ~ Beta(a, b) -- P(signal | theta) / (E[samples | theta] t(x)) -- instead of the posterior expectation.
   e = 0 (default) is greedy on the expectation and uses no random numbers; e = 1 values every candidate at a draw,
   MoPPS's exploration with this value in place of MoPPS's distance to a target pass rate.
Departures: this rule is ours. It keeps MoPPS's selection (a Beta posterior per prompt, candidates x k offered,
the best k kept) and replaces its criterion, |theta - 0.5|, by the planner's exact signal per token for the
sampler in use. For uniform n with an exact rate the two agree (1 - p^n - (1 - p)^n peaks at p = 0.5); they differ
for adaptive samplers (seq spends more samples on hard prompts, so its value per token peaks above 0.5), for
uncertain beliefs (an expectation over the Beta, not one draw) and for prompts of different lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from reinforce_ada.sampling.law import check_size, uniform_zero, visit_law
from reinforce_ada.types import Prompt

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


def value_table(cls: Any, opts: Any) -> ValueTable:
    """The value table of the sampler `cls` under its options `opts`, built once per configuration."""
    return _table(cls, opts.replace(select_explore=0.0))


@lru_cache(maxsize=64)
def _table(cls: Any, opts: Any) -> ValueTable:
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


def candidate_values(
    table: ValueTable, candidates: list[Prompt], memory: Any, rng: np.random.Generator, explore: float
) -> np.ndarray:
    """Each candidate's expected signal per generated token (module docstring); `explore` > 0 draws from `rng`."""
    memory.prefetch(candidates)  # an oracle's rates: one batched call
    ab = np.array([memory.posterior(p) for p in candidates], dtype=float).reshape(-1, 2)
    tokens = np.array([memory.tokens_per_sample(p) for p in candidates], dtype=float)
    sig, smp = table.expect(ab[:, 0], ab[:, 1])
    if explore > 0 and len(candidates):
        draw = rng.random(len(candidates)) < explore
        theta = rng.beta(ab[:, 0], ab[:, 1])
        t_sig, t_smp = table.at(theta)
        sig, smp = np.where(draw, t_sig, sig), np.where(draw, t_smp, smp)
    return sig / (smp * tokens)


def value_choose(
    candidates: list[Prompt], k: int, memory: Any, rng: np.random.Generator, table: ValueTable, explore: float
) -> tuple[list[Prompt], np.ndarray, np.ndarray]:
    """The k candidates of highest value (ties by candidate order), in candidate order; also every candidate's value
    and the chosen ones' (for the metrics)."""
    values = candidate_values(table, candidates, memory, rng, explore)
    best = np.sort(np.lexsort((np.arange(len(candidates)), -values))[:k])
    return [candidates[i] for i in best], values, values[best]
