"""Knapsack RL (arXiv 2509.25849, liziniu/KnapsackRL `exploration_utils.py`): allocate a step's budget by a knapsack.

Each prompt is an item; N samples on it are worth (1 - p^N - (1 - p)^N) p (1 - p)^2 -- the chance of a non-zero
gradient times the gradient's size -- and cost N. Per step, with budget N_total (default 8 per prompt, the paper's
n = 8) and N in [min_samples, max_samples] (paper [2, 128]: `knapsack:min_samples=2,max_samples=128`):
1) p_hat is the mean of the prompt's last `history` outcomes (paper: a 16-reward buffer) once at least half of them
   are remembered (paper: 8); a prompt with fewer gets the default N_total / B.
2) A prompt with p_hat = 0 or 1 gets min_samples (paper: negative_n = positive_n = min_n = 2); the others start at
   min_samples and share the rest by the knapsack (`est.knapsack_allocate`: exact, the same optimum as the paper's
   dynamic programme).
3) The paper's fallback: when the rest exceeds what the uncertain prompts need -- sum of min(N_max, ln 0.1 /
   ln max(p, 1 - p)), the samples for a 90% chance of a non-zero gradient -- the excess goes evenly to the p_hat = 0
   prompts (or, if there are none, to the other prompts not in the knapsack); what they cannot take under the cap
   stays in the knapsack (the paper's code divides by zero when there are no such prompts).
4) One batch, every sample trained on, GRPO's group baseline with std, no per-prompt weight (the paper's GRPO).
Where the released code departs from the paper, both are offered:
- `knapsack_value="total"` (default, the paper's objective sum_x value(p_x, N_x)) or `"reference"` (the code's
  dynamic programme: a prompt given nothing beyond min_samples scores 0, one given k more scores value(p, lo + k);
  allocations differ in about a fifth of small cases, the reference spreading the budget over more prompts);
- `knapsack_estimate="recent"` (default, the paper's "last 16 rewards") or `"last_visit"` (the code's
  `epoch_estimation`: the whole latest visit once it alone has >= `history` samples, else the last `history`
  outcomes across visits -- with 16-of-32 visits a prompt's estimate then rests on one visit only).
Departures: N never exceeds max_samples (the paper's fallback can push p_hat = 0 prompts past max_n); budget that
cannot be placed under the caps is left unspent and `metrics()["budget_used"]` says so. The p_hat buffer lives in
the strategy's prompt memory (`sampling.memory`, `recent`), checkpointed with it; a `predictor=` callable
(prompt -> p) replaces it (the planner uses that to run the strategy at known pass rates), and so does
`estimator=oracle` (the exact rate, a benchmark ceiling; the other estimators are not read here).
`est:allocation=knapsack` is the other composition: Est's estimator (tracker, predictor, both), Est's global baseline
and residual weight, and this knapsack as its allocation rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.checks import choice
from reinforce_ada.sampling.options import option
from reinforce_ada.sampling.strategies.est import BudgetOptions, Est, knapsack_allocate
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group

KNAPSACK_ESTIMATES = ("recent", "last_visit")


@dataclass(frozen=True)
class KnapsackOptions(BudgetOptions):
    """Knapsack RL's options (module docstring); GRPO's group baseline with std, the paper's."""

    knapsack_estimate: str = option(
        "recent",
        "p_hat: recent (mean of the last `history` outcomes, the paper) or last_visit (the released code: the latest "
        "visit alone once it has >= history samples)",
        plan=False,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        choice("knapsack_estimate", self.knapsack_estimate, KNAPSACK_ESTIMATES)


CONFIDENCE = 0.9
"""The paper's alpha: the fallback's cost of a prompt is the samples for this chance of a non-zero gradient."""


def _spread(counts: np.ndarray, idx: list[int], amount: int, hi: int) -> int:
    """Give `amount` evenly (lowest index first for the remainder) to `idx`, capped at hi; return what is left."""
    while amount > 0 and idx:
        room = [i for i in idx if counts[i] < hi]
        if not room:
            break
        share, rest = divmod(amount, len(room))
        for j, i in enumerate(room):
            add = min(share + (1 if j < rest else 0), hi - counts[i])
            counts[i] += add
            amount -= add
    return amount


def knapsack_budget(p_hat: list[float | None], budget: int, lo: int, hi: int, value: str = "total") -> np.ndarray:
    """The paper's per-step allocation (module docstring, 1-3); None marks a prompt without enough history."""
    b = len(p_hat)
    counts = np.zeros(b, dtype=int)
    if b == 0:
        return counts
    default = min(max(budget // b, lo), hi)
    eff = [i for i, p in enumerate(p_hat) if p is not None and 0.0 < p < 1.0]
    zero = [i for i, p in enumerate(p_hat) if p == 0.0]
    rest = [i for i in range(b) if i not in set(eff)]
    for i, p in enumerate(p_hat):
        counts[i] = default if p is None else lo
    left = budget - int(counts.sum())
    if left <= 0:
        return counts
    if not eff:
        _spread(counts, zero or list(range(b)), left, hi)
        return counts
    need = sum(int(min(hi, math.log(1 - CONFIDENCE) / math.log(max(p_hat[i], 1 - p_hat[i])))) for i in eff)  # type: ignore[arg-type]
    if need < left:  # what the others cannot take (caps, or no others) stays in the knapsack
        left = need + _spread(counts, zero or rest, left - need, hi)
    p_eff = np.array([p_hat[i] for i in eff], dtype=float)
    counts[eff] = knapsack_allocate(p_eff, left + lo * len(eff), lo, hi, value)
    return counts


class Knapsack(Est):
    traits = Traits(streams=False, planner="allocation", takes_predictor=True)
    Options = KnapsackOptions
    opts: KnapsackOptions
    METRICS = {
        **Est.METRICS,
        "prompts_without_history": "Prompts with too few remembered outcomes for a p_hat (given N_total / B).",
    }

    @classmethod
    def plan_counts(cls, rates: np.ndarray, opts: KnapsackOptions, budget: int) -> np.ndarray:
        return knapsack_budget(
            [float(p) for p in rates], budget, opts.min_samples, opts.max_samples, opts.knapsack_value
        )

    def on_add(self, ids: list[str]) -> None:
        p_hat: list[float | None] = []
        oracle = self.predictor is None and self.opts.estimator == "oracle"
        if oracle:  # the exact rate replaces the reward buffer: one batched call for the batch
            self.memory.prefetch([self.prompts[pid] for pid in ids])
        for pid in ids:
            if self.predictor is not None:
                p = self.estimate(self.prompts[pid])
            elif oracle:
                p = self.memory.estimate(self.prompts[pid])
            else:
                p = self.memory.recent_rate(pid, rule=self.opts.knapsack_estimate)
            p_hat.append(p)
        budget = self.opts.budget if self.opts.budget is not None else 8 * len(ids)
        counts = knapsack_budget(p_hat, budget, self.opts.min_samples, self.opts.max_samples, self.opts.knapsack_value)
        self.p_hat.update({pid: p for pid, p in zip(ids, p_hat, strict=True) if p is not None})
        self.alloc.update(zip(ids, counts.tolist(), strict=True))

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool])  # type: ignore[arg-type]
            for pid, pool in self.pools.items()
            if pool
        ]

    def metrics(self) -> dict[str, Any]:
        return {**super().metrics(), "prompts_without_history": len(self.alloc) - len(self.p_hat)}
