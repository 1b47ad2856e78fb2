"""`select=iw`: importance-weighted admission -- draw k of the C x k candidates at random, weight them back to unbiased.

Ours, not a published method (docs/allocators.md, "select=iw"; the design is docs/allocator_memo.md, section 3).
1) Utility. For a candidate x with pass-rate belief p ~ Beta(a, b) (`PromptMemory.posterior` under `estimator`,
   `oracle` included), u(x) = sqrt(E_p[P(signal | p)]), P(signal | p) from the planner's exact per-visit law of the
   sampler behind the selection (`sampling.law.value_table(cls, opts).expect`; for uniform n it is
   1 - p^n - (1 - p)^n).
2) Proposal. The defensive mixture q(x) = (1 - lam) u(x) / sum(u) + lam / N over the N candidates (N = C x k when the
   source fills the candidate list), lam = `iw_mix`; when every u is 0, q is uniform.
3) Draw. Inclusion probabilities pi(x) = k q(x), capped at 1 with the excess redistributed over the others in
   proportion to q (repeated until none is above 1; sum pi = k). Exactly k distinct prompts are drawn by randomised
   systematic sampling: the candidates in a random order, one uniform start U in [0, 1), the units whose cumulative-pi
   interval holds U, U + 1, ..., U + k - 1. Each x is admitted with probability exactly pi(x).
4) Weights. An admitted x gets the Horvitz-Thompson weight w(x) = k / (N pi(x)) (= 1 / (C pi(x)) at N = C k;
   uniform admission, pi = k / N, gives w = 1 exactly), clipped at `iw_clip`, then divided by the mean over the step's
   admitted prompts (refills included). `iw_weights=false` keeps the draw and sets w = 1 (the memo's control arm).
   The weight multiplies the prompt's `Group.weight`, the per-prompt weight path Ada-Est's residual takes
   (`advantages.compute_advantages` -> `StepBatch.weights` -> `training.rows.Row.weight` -> the loss's `weight_B`;
   the simulator's update reads the same weights). `compute_advantages` then rescales the weights of the groups with
   signal to mean 1 (its `normalize_weights`), which changes the global scale only, not the ratios.
Why. Before the clip and the self-normalisation, (1/k) sum over admitted x of w(x) g(x) is an unbiased estimate of
(1/N) sum over all candidates of g(x), the gradient a uniform batch of the candidates would give in expectation: the
trained distribution stays the held-out one (no selection bias, unlike nearest-0.5 selection), and only the variance
changes. Under std-normalised GRPO a group's gradient norm depends little on p, so E||g_x||^2 is about proportional to
P(signal), and the variance-minimising proposal is q proportional to sqrt(E||g_x||^2) (Zhao & Zhang 2015; Katharopoulos
& Fleuret 2018): compute moves from prompts likely to give an all-equal group (gradient exactly 0) to prompts with
signal, while the rarely chosen ones keep their share through w. The mixture bounds w by 1 / lam before the clip.
Departures: the self-normalisation, not the clip, is where the bias comes from: dividing by the step's mean weight (a
random quantity) makes the estimate a ratio, and prompts at p near 0.02 or 0.98 (rarely admitted, large w) get
0.85-0.89 of their unbiased weight on average with or without the clip (measured in the project's third review). The
clip binds rarely, since the mixture already bounds w by 1 / lam. Both are logged: `iw_weight_max`, `iw_ess` = (sum
w)^2 / sum w^2 over the admitted prompts, both of the applied, normalised weights, so the maximum may exceed
`iw_clip`; u is read from the belief, not the true p (except under the oracle), so the proposal is only as good as the
estimator -- the estimate stays unbiased whatever u is, as long as pi > 0 (lam > 0); with lam = 0 a candidate of u = 0
is never drawn, which is unbiased only if its gradient is truly 0. The memo's token-priced variant (u over expected
tokens) is not built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.rule import AdmissionRule, RankingOptions, RuleContext
from reinforce_ada.sampling.checks import boolean, unit
from reinforce_ada.sampling.fields import option
from reinforce_ada.sampling.law import ValueTable
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class IwOptions(RankingOptions):
    iw_mix: float = option(
        0.2,
        "share lam in [0, 1] of the uniform proposal in the defensive mixture (1 - lam) u / sum(u) + lam / "
        "(candidates x k); it bounds the weights by 1 / lam",
        plan=False,
    )
    iw_clip: float = option(
        3.0, "clip each Horvitz-Thompson weight at this (>= 1) before the self-normalisation", plan=False
    )
    iw_weights: bool = option(
        True, "multiply each admitted prompt's loss by its weight (false: the same draw, weights 1)", plan=False
    )

    def check(self) -> None:
        super().check()
        unit("iw_mix", self.iw_mix)
        if isinstance(self.iw_clip, bool) or not self.iw_clip >= 1.0:
            raise ConfigError(
                f"iw_clip={self.iw_clip!r} is out of range; it must be >= 1 (the cap on a Horvitz-Thompson weight)"
            )
        boolean("iw_weights", self.iw_weights)


def utilities(table: ValueTable, candidates: list[Prompt], memory: Any) -> np.ndarray:
    """u(x) = sqrt(E_p[P(signal | p)]) for each candidate (module docstring, 1)."""
    memory.prefetch(candidates)  # an oracle's rates: one batched call
    ab = np.array([memory.posterior(p) for p in candidates], dtype=float).reshape(-1, 2)
    signal, _ = table.expect(ab[:, 0], ab[:, 1])
    return np.sqrt(np.clip(signal, 0.0, 1.0))


def proposal(u: np.ndarray, mix: float) -> np.ndarray:
    """The defensive mixture (1 - mix) u / sum(u) + mix / N; uniform when sum(u) = 0."""
    u = np.asarray(u, dtype=float)
    n = len(u)
    total = u.sum()
    share = u / total if total > 0 else np.full(n, 1.0 / n)
    return (1.0 - mix) * share + mix / n


def inclusion_probabilities(q: np.ndarray, k: int) -> np.ndarray:
    """pi = k q capped at 1, the excess redistributed over the uncapped in proportion to q (uniformly where their q
    sums to 0); sum(pi) = min(k, N), every pi in [0, 1]."""
    q = np.asarray(q, dtype=float)
    n = len(q)
    k = min(k, n)
    pi = np.zeros(n)
    capped = np.zeros(n, dtype=bool)
    while True:
        free = ~capped
        left = k - capped.sum()
        if left <= 0 or not free.any():
            pi[free] = 0.0
            break
        mass = q[free].sum()
        pi[free] = left * (q[free] / mass if mass > 0 else np.full(free.sum(), 1.0 / free.sum()))
        over = free & (pi >= 1.0)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
    return np.clip(pi, 0.0, 1.0)


def systematic_draw(pi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exactly round(sum(pi)) distinct indices, index i drawn with probability pi[i] (randomised systematic sampling:
    random order, one uniform start); sorted ascending."""
    pi = np.asarray(pi, dtype=float)
    k = int(round(pi.sum()))
    if k == 0:
        return np.zeros(0, dtype=int)
    order = rng.permutation(len(pi))
    cum = np.cumsum(pi[order])
    cum *= k / cum[-1]  # total k up to rounding: the last point U + k - 1 < k lands inside
    points = rng.random() + np.arange(k)
    last = int(np.flatnonzero(pi[order] > 0)[-1])  # a point past a rounded-down total is the last drawable unit's
    picked = order[np.minimum(np.searchsorted(cum, points, side="right"), last)]
    if len(np.unique(picked)) != k:  # pi <= 1 makes each interval hold at most one point; rounding cannot break it
        raise RuntimeError(f"systematic sampling drew a unit twice (pi max {pi.max()!r}); this is a bug")
    return np.sort(picked)


def ht_weights(pi: np.ndarray, n_candidates: int, k: int, clip: float) -> np.ndarray:
    """Horvitz-Thompson weights k / (N pi) of the admitted prompts' inclusion probabilities, clipped at `clip`."""
    return np.minimum(k / (n_candidates * np.asarray(pi, dtype=float)), clip)


def self_normalise(w: np.ndarray) -> np.ndarray:
    """`w` divided by its mean (an empty array stays empty)."""
    w = np.asarray(w, dtype=float)
    return w / w.mean() if len(w) else w


def iw_choose(
    candidates: list[Prompt], k: int, memory: Any, rng: np.random.Generator, table: ValueTable, opts: Any
) -> tuple[list[Prompt], list[float]]:
    """Admit k of `candidates` (module docstring, 1-4); return them in candidate order with their clipped,
    not yet self-normalised weights (1 each with `iw_weights=false`, or when there are no more than k candidates)."""
    if len(candidates) <= k:
        return list(candidates), [1.0] * len(candidates)
    u = utilities(table, candidates, memory)
    if np.all(u == u[0]):  # uniform admission: pi = k / N and w = 1 exactly (no rounding through the mixture)
        pi, exact = np.full(len(candidates), k / len(candidates)), True
    else:
        pi, exact = inclusion_probabilities(proposal(u, opts.iw_mix), k), False
    picked = systematic_draw(pi, rng)
    weighted = opts.iw_weights and not exact
    w = ht_weights(pi[picked], len(candidates), k, opts.iw_clip) if weighted else np.ones(len(picked))
    return [candidates[i] for i in picked], [float(x) for x in w]


def weight_metrics(w: np.ndarray) -> dict[str, float]:
    """`iw_weight_max` and `iw_ess` = (sum w)^2 / sum w^2 of a step's applied weights (0 and 0 when none)."""
    w = np.asarray(w, dtype=float)
    if not len(w):
        return {"iw_weight_max": 0.0, "iw_ess": 0.0}
    return {"iw_weight_max": float(w.max()), "iw_ess": float(w.sum() ** 2 / (w * w).sum())}


class ImportanceWeighted(AdmissionRule):
    """The rule of the module docstring: `iw_weight_max` and `iw_ess` in `metrics()`."""

    ranks = True
    Options = IwOptions
    METRICS = {
        "iw_weight_max": "Largest applied weight (clipped, self-normalised) over the admitted prompts (0 if none).",
        "iw_ess": "Effective sample size of those weights, (sum w)^2 / sum w^2 (0 if none).",
    }

    def __init__(self, opts: Any, ctx: RuleContext):
        super().__init__(opts, ctx)
        self.table = ctx.law()
        self.raw: dict[str, float] = {}
        """Each prompt admitted this step -> its clipped Horvitz-Thompson weight (not yet normalised)."""

    def reset_step(self) -> None:
        self.raw = {}

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        chosen, w = iw_choose(candidates, k, self.ctx.memory, self.ctx.rng, self.table, self.opts)
        self.raw.update((p.id, x) for p, x in zip(chosen, w, strict=True))
        return chosen, w

    def group_weights(self) -> dict[str, float]:
        """The step's admitted prompts' weights divided by their mean (module docstring, 4)."""
        ids = list(self.raw)
        return dict(zip(ids, self_normalise(np.array([self.raw[i] for i in ids])).tolist(), strict=True))

    def metrics(self) -> dict[str, Any]:
        return weight_metrics(np.array(list(self.group_weights().values())))

    def state_dict(self) -> dict[str, Any]:
        return {"iw_raw": dict(self.raw)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.raw = dict(state.get("iw_raw", {}))  # absent before select=iw
