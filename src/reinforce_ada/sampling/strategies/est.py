"""Reinforce-Ada-Est: estimate each prompt's pass rate, allocate samples by it, one batch, no downsampling.

1) p_hat comes from the strategy's prompt memory (`sampling.memory`) by `estimator`: `tracker` (the paper's Ada-EMA, a
   Beta-prior EMA of the prompt's own visits), `predictor` (a difficulty predictor learned online over all prompts,
   `sampling.memory.predictor`: it fixes the cold start, where a prompt seen about twice in a run is allocated by its
   Beta(1, 1) prior), `both` (the predictor as the tracker's prior) or `oracle` (the exact rate under the current
   policy, a benchmark ceiling: `sampling.memory.oracle`). A `predictor=` callable (prompt -> p_hat) passed to the
   constructor overrides all four.
2) Allocation weights: `inv_sqrt` 1/sqrt(p_hat + eps) (the paper's), `variance` sqrt((1 - p_hat) / p_hat) (the
   paper's variance-optimal result for Reinforce with a baseline), or `objective` f'(p_hat).
3) N_x = clip(c * w_x, min_samples, max_samples), integer, with c chosen so the step total equals `budget` exactly
   (largest-remainder rounding); when the budget lies outside [B * N_min, B * N_max] every prompt sits at a clip
   and `metrics()["budget_used"]` reports the total actually drawn. `allocation="knapsack"` instead maximises
   Knapsack RL's value sum_x (1 - p^N - (1 - p)^N) p (1 - p)^2 over the same range and budget (`knapsack_allocate`;
   the standalone `knapsack` strategy is the paper's full rule), and `allocation="signal"` the expected number of
   prompts with signal, sum_x (1 - p^N - (1 - p)^N) (`signal_allocate`; with `estimator=oracle`, the oracle arms'
   ceiling, docs/allocators.md). Both are exact greedy solutions (`greedy_allocate`).
4) `budget_unit = "tokens"` prices each sample at its prompt's expected length (`strategies.priced`, DUET-style).
5) Every sample is trained on; the per-prompt residual weight is 1/sqrt(p_hat + eps) (`residual="inv_sqrt"`).
The authors' released Ada-Est (RLHFlow/Reinforce-Ada branch `hanze`, `ray_trainer_ema.py`) differs from the paper's
Algorithm: one round, Beta(1, 16) prior, EMA-0.9 counts keyed by a stable prompt id, allocation weights 1/p_hat (not
1/sqrt), 1 sample each plus the rest by largest remainders (no cap), every sample trained, no residual weight. It is
the arm `est:allocation=remainder,objective=log,prior_beta=16,min_samples=1,max_samples=BUDGET,residual=none`
(`bench.arms.ARMS["est-released"]`); the paper's 1/sqrt(p_hat) stays the default. Its p_hat floor is 1e-6, ours
`eps` (1e-3): with a Beta(1, 16) prior p_hat never gets near either.
Departure: the paper writes the residual with the step's realised pool mean; we use the same p_hat that set N_x,
so sampling weight x residual weight stays ~ 1/p_hat (the hybrid scheme) and a pool of zeros cannot produce a
1/sqrt(eps) weight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least, check_group, choice
from reinforce_ada.sampling.memory import PassRateTracker
from reinforce_ada.sampling.objectives import get_objective
from reinforce_ada.sampling.options import Options, option, same_as
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.strategies.priced import BUDGET_UNITS, check_priced, priced_counts
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt

Predictor = Callable[[Prompt], float]
ALLOCATIONS = ("inv_sqrt", "variance", "objective", "knapsack", "remainder", "signal")
RESIDUALS = ("inv_sqrt", "none")
KNAPSACK_VALUES = ("total", "reference")


@dataclass(frozen=True)
class BudgetOptions(Options):
    """A step's total budget split over its prompts within [min_samples, max_samples] (est, knapsack)."""

    budget: int | None = option(None, "total samples per step (default 8 per prompt, the paper's setting)")
    min_samples: int = option(4, "lower clip on samples per prompt (N_min; knapsack paper 2)")
    max_samples: int = option(32, "cap on samples per prompt per step (N_max)")
    knapsack_value: str = option(
        "total",
        "knapsack (and est allocation=knapsack): total (the paper's objective, sum of each prompt's value) or "
        "reference (the released code's DP: a prompt given nothing beyond min_samples scores 0)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("min_samples", self.min_samples, 1)
        check_group(self.n, self.max_samples)
        if self.min_samples > self.max_samples:
            raise ConfigError(f"min_samples={self.min_samples} must be <= max_samples={self.max_samples}")
        if self.budget is not None:
            at_least("budget", self.budget, 2)  # a budget below 2 samples cannot give any prompt a group
        choice("knapsack_value", self.knapsack_value, KNAPSACK_VALUES)


@dataclass(frozen=True)
class EstOptions(BudgetOptions):
    """Ada-Est's options (module docstring): the paper's 1/sqrt(p_hat) allocation and residual weight."""

    allocation: str = option(
        "inv_sqrt",
        f"allocation rule: one of {', '.join(ALLOCATIONS)} (remainder: the authors' released Ada-Est -- min_samples "
        "each, the rest split in proportion to the objective's weight f'(p_hat), largest remainders; signal: maximise "
        "the expected number of prompts with signal, sum 1 - p^N - (1-p)^N, exactly)",
    )
    residual: str = option(
        "inv_sqrt", "residual per-prompt weight: inv_sqrt (1/sqrt(p_hat+eps), the paper's) or none", plan=False
    )
    budget_unit: str = option(
        "samples",
        "how a sample is priced under the budget: samples (one unit each, the paper's) or tokens (its prompt's "
        "expected completion length; the budget is budget samples at the batch's mean length: DUET-style)",
    )
    advantage: str = same_as(Options, "advantage", "global")
    scale_std: bool = same_as(Options, "scale_std", False)

    def __post_init__(self) -> None:
        super().__post_init__()
        choice("allocation", self.allocation, ALLOCATIONS)
        choice("residual", self.residual, RESIDUALS)
        choice("budget_unit", self.budget_unit, BUDGET_UNITS)
        check_priced(self.allocation, self.budget_unit)


def allocation_weights(p_hat: np.ndarray, opts: Any) -> np.ndarray:
    if opts.allocation == "remainder":  # the objective's weight, split as the released code does
        return get_objective(opts.objective)(
            np.clip(np.asarray(p_hat, dtype=float), 0.0, 1.0), alpha=opts.alpha, eps=opts.eps
        )
    if opts.allocation in ("knapsack", "signal"):
        raise ValueError(f"allocation={opts.allocation!r} is not a weight rule: use allocate_counts")
    p = np.clip(np.asarray(p_hat, dtype=float), 0.0, 1.0)
    if opts.allocation == "inv_sqrt":
        return 1.0 / np.sqrt(p + opts.eps)
    if opts.allocation == "variance":
        q = np.clip(p, opts.eps, 1.0)
        return np.sqrt(np.clip(1.0 - q, opts.eps, 1.0) / q)
    return get_objective(opts.objective)(p, alpha=opts.alpha, eps=opts.eps)


def allocate(weights: np.ndarray, budget: int, lo: int, hi: int) -> np.ndarray:
    """Integers N_x in [lo, hi], proportional to weights before clipping, summing to `budget` when feasible."""
    w = np.asarray(weights, dtype=float)
    b = len(w)
    if b == 0:
        return np.zeros(0, dtype=int)
    target = min(max(budget, lo * b), hi * b)

    def total(c: float) -> float:
        return float(np.clip(c * w, lo, hi).sum())

    c_lo, c_hi = 0.0, 1.0
    while total(c_hi) < target:
        c_hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (c_lo + c_hi)
        c_lo, c_hi = (mid, c_hi) if total(mid) < target else (c_lo, mid)
    x = np.clip(c_hi * w, lo, hi)
    n = np.floor(x).astype(int)
    short = int(target - n.sum())
    if short > 0:  # largest remainders first, among prompts still under the cap; ties by index (deterministic)
        order = np.lexsort((np.arange(b), -(x - n)))
        room = [i for i in order if n[i] < hi]
        n[room[:short]] += 1
    elif short < 0:
        order = np.lexsort((np.arange(b), x - n))
        room = [i for i in order if n[i] > lo]
        n[room[:-short]] -= 1
    return n


def knapsack_value(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Knapsack RL's value of N samples on a prompt with pass rate p: P(non-zero gradient) x p (1 - p)^2."""
    p, n = np.asarray(p, dtype=float), np.asarray(n, dtype=float)
    return (1.0 - p**n - (1.0 - p) ** n) * p * (1.0 - p) ** 2


def knapsack_allocate(p_hat: np.ndarray, budget: int, lo: int, hi: int, value: str = "total") -> np.ndarray:
    """Integers N_x in [lo, hi] summing to `budget` (clipped to [B lo, B hi]) that maximise the knapsack's value.

    `value="total"` (the paper's objective): sum_x value(p_x, N_x). Each value is concave in N (its increment
    p^N (1 - p) + (1 - p)^N p shrinks with N), so taking the budget's largest increments is exact
    (`greedy_allocate`), in O(B (hi - lo) log) instead of the dynamic programme's O(B budget (hi - lo)).
    `value="reference"` (the released code's dynamic programme, `solve_by_dp`): a prompt left at `lo` scores 0 and
    one given k >= 1 more scores value(p, lo + k) -- its first extra sample is worth the whole value(p, lo + 1), not
    the increment over value(p, lo), which spreads the budget over more prompts. Its gains are still non-increasing
    in k (value is concave and value(p, 1) = 0), so the same greedy is exact for it too.
    Ties (e.g. prompts at p = 0 or 1, whose gains are all 0) go to the lowest index.
    """
    if value not in KNAPSACK_VALUES:
        raise ValueError(f"value={value!r}; choose one of {list(KNAPSACK_VALUES)}")
    p = np.clip(np.asarray(p_hat, dtype=float), 0.0, 1.0)
    gain_BK = signal_gains(p, lo, hi) * (p * (1 - p) ** 2)[:, None]
    if value == "reference" and gain_BK.size:
        gain_BK[:, 0] = knapsack_value(p, lo + 1)
    return greedy_allocate(gain_BK, budget, lo)


def signal_gains(p: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """(B, hi - lo): the rise in P(a group of N has signal) = 1 - p^N - (1 - p)^N from N = lo + j to lo + j + 1,
    p^N (1 - p) + (1 - p)^N p: non-increasing in N (each term is concave)."""
    steps_BK = lo + np.arange(hi - lo)[None, :]
    p_B1 = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)[:, None]
    return p_B1**steps_BK * (1 - p_B1) + (1 - p_B1) ** steps_BK * p_B1


def greedy_allocate(gain_BK: np.ndarray, budget: int, lo: int) -> np.ndarray:
    """`lo` each, then the budget's largest increments: gain_BK[x, j] is what prompt x's (lo + j + 1)-th sample adds.
    Exact for a sum of concave values (every row non-increasing in j); the total is `budget` clipped to
    [B lo, B hi] with hi = lo + K. Ties go to the lowest index (row-major order)."""
    b, k = gain_BK.shape
    n = np.full(b, lo, dtype=int)
    extra = min(max(budget, lo * b), (lo + k) * b) - lo * b
    if b == 0 or extra <= 0:
        return n
    order = np.lexsort((np.arange(gain_BK.size), -gain_BK.ravel()))[:extra]
    np.add.at(n, order // k, 1)
    return n


def signal_allocate(p_hat: np.ndarray, budget: int, lo: int, hi: int) -> np.ndarray:
    """Integers N_x in [lo, hi] summing to `budget` (clipped to [B lo, B hi]) that maximise the expected number of
    prompts with signal, sum_x 1 - p_x^N_x - (1 - p_x)^N_x (the oracle arms' allocation; exact by `greedy_allocate`).
    Prompts at p = 0 or 1 gain nothing; budget beyond what the others can take goes to the lowest indices."""
    return greedy_allocate(signal_gains(np.asarray(p_hat, dtype=float), lo, hi), budget, lo)


def remainder_allocate(weights: np.ndarray, budget: int, lo: int, hi: int) -> np.ndarray:
    """`lo` samples each, then the rest of `budget` split in proportion to `weights`: floors first, then one more to
    the largest fractional parts (ties by index) -- the authors' released Ada-Est (branch `hanze`,
    `ray_trainer_ema.py`, with lo = 1 and no cap). A prompt whose share would pass `hi` is held at `hi` and the excess
    is split over the others the same way (the released code has no cap; set max_samples >= budget to match it)."""
    w = np.asarray(weights, dtype=float)
    b = len(w)
    n = np.full(b, lo, dtype=int)
    rest = min(max(budget, lo * b), hi * b) - lo * b
    active = np.arange(b)
    while rest > 0 and len(active):
        share = rest * w[active] / w[active].sum()
        over = n[active] + share > hi
        if over.any():  # hold those at the cap; split what is left over the rest again
            capped = active[over]
            rest -= int((hi - n[capped]).sum())
            n[capped] = hi
            active = active[~over]
            continue
        floor = np.floor(share).astype(int)
        n[active] += floor
        left = rest - int(floor.sum())
        order = np.lexsort((active, -(share - floor)))[:left]
        n[active[order]] += 1
        break
    return n


def allocate_counts(p_hat: np.ndarray, opts: Any, budget: int) -> np.ndarray:
    """Est's samples per prompt for one batch: the weight rules of `allocation_weights` or the knapsack."""
    if opts.allocation == "remainder":
        return remainder_allocate(allocation_weights(p_hat, opts), budget, opts.min_samples, opts.max_samples)
    if opts.allocation == "knapsack":
        return knapsack_allocate(p_hat, budget, opts.min_samples, opts.max_samples, opts.knapsack_value)
    if opts.allocation == "signal":
        return signal_allocate(p_hat, budget, opts.min_samples, opts.max_samples)
    return allocate(allocation_weights(p_hat, opts), budget, opts.min_samples, opts.max_samples)


class Est(PoolStrategy):
    traits = Traits(streams=True, planner="allocation", takes_predictor=True)
    Options = EstOptions
    opts: EstOptions
    METRICS = {
        "budget_used": "Samples allocated over the step's prompts (below budget when every prompt sits at a clip).",
        "p_hat_mean": "Mean over the step's prompts of the pass-rate estimate p_hat that set their allocation.",
        "samples_per_prompt_max": "The largest allocation a prompt got this step.",
        "samples_per_prompt_min": "The smallest allocation a prompt got this step.",
    }

    @classmethod
    def plan_counts(cls, rates: np.ndarray, opts: EstOptions, budget: int) -> np.ndarray:
        return allocate_counts(rates, opts, budget)

    @classmethod
    def cost_hint(cls, opts: BudgetOptions) -> float:
        return float(opts.max_samples)

    @classmethod
    def check_training(cls, opts: BudgetOptions, batch_size: int) -> None:
        if opts.budget is not None and opts.budget < batch_size * opts.min_samples:
            raise ConfigError(
                f"strategy.budget={opts.budget} is below run.batch_size x strategy.min_samples = "
                f"{batch_size} x {opts.min_samples}: not every prompt of a step could get its minimum"
            )

    def __init__(self, cfg: Any, predictor: Predictor | None = None):
        self.predictor = predictor
        super().__init__(cfg)

    @property
    def tracker(self) -> PassRateTracker:
        """The memory's pass-rate tracker (the TRL integration shares its counts across processes)."""
        return self.memory.tracker

    def _reset(self) -> None:
        super()._reset()
        self.p_hat: dict[str, float] = {}
        self.alloc: dict[str, int] = {}

    def estimate(self, prompt: Prompt) -> float:
        if self.predictor is None:
            return self.memory.estimate(prompt)
        p = float(self.predictor(prompt))
        if not 0.0 <= p <= 1.0 or np.isnan(p):
            raise ValueError(f"difficulty predictor returned {p} for prompt {prompt.id!r}; it must be in [0, 1]")
        return p

    def on_add(self, ids: list[str]) -> None:
        """Allocate the budget over the prompts given together (the step's batch)."""
        if self.predictor is None:
            self.memory.prefetch([self.prompts[pid] for pid in ids])  # an oracle's rates: one batched call
        p_hat = np.array([self.estimate(self.prompts[pid]) for pid in ids])
        budget = self.opts.budget if self.opts.budget is not None else 8 * len(ids)
        if self.opts.budget_unit == "tokens":  # a sample costs its prompt's expected length (`strategies.priced`)
            costs = np.array([self.memory.tokens_per_sample(self.prompts[pid]) for pid in ids])
            counts = priced_counts(p_hat, self.opts, budget, costs, allocation_weights, signal_gains)
        else:
            counts = allocate_counts(p_hat, self.opts, budget)
        self.p_hat.update(zip(ids, p_hat.tolist(), strict=True))
        self.alloc.update(zip(ids, counts.tolist(), strict=True))

    def batch_end(self, pid: str) -> int:
        return self.alloc[pid]

    def on_batch(self, pid: str) -> bool:
        return True  # the visit is recorded in the memory (tracker included) by `PoolStrategy`

    def build(self) -> list[Group]:
        groups = []
        for pid, pool in self.pools.items():
            if not pool:
                continue
            weight = 1.0 / np.sqrt(self.p_hat[pid] + self.opts.eps) if self.opts.residual == "inv_sqrt" else 1.0
            groups.append(Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool], weight=float(weight)))
        return groups

    def metrics(self) -> dict[str, Any]:
        p = list(self.p_hat.values())
        return {
            **super().metrics(),
            "budget_used": int(sum(self.alloc.values())),
            "p_hat_mean": float(np.mean(p)) if p else float("nan"),
            "samples_per_prompt_max": max(self.alloc.values(), default=0),
            "samples_per_prompt_min": min(self.alloc.values(), default=0),
        }

    def _extra_state(self) -> dict[str, Any]:
        # the tracker is also in the memory's state; kept here too, where Est checkpoints have always had it
        return {"tracker": self.tracker.state_dict(), "p_hat": self.p_hat, "alloc": self.alloc}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        if "tracker" in extra:
            self.tracker.load_state_dict(extra["tracker"])
        self.p_hat, self.alloc = dict(extra["p_hat"]), dict(extra["alloc"])
