"""Est's budget priced in tokens (`budget_unit = "tokens"`): a prompt's cost is its expected length, not one unit.

Where answers are long and their length varies, a sample of a prompt whose answers run to 300 tokens costs ten of
one whose answers take 30. With `budget_unit = "tokens"`, each prompt x's sample costs t(x) tokens, its expected
completion length (the prompt memory's length EMA, else its level's running mean, else the mean over every
recorded sample, else 1: `PromptMemory.tokens_per_sample`; the level's mean is what lets the price differ between
prompts drawn for the first time, which is every prompt while a pool is larger than a run's visits), and the step
spends T = budget x mean(t) tokens -- the sample budget at the batch's mean length, so the two units spend alike
when every prompt costs the same:
1) proportional rules (inv_sqrt, variance, objective): N_x = clip(c w_x / t(x), min, max) with c set so that
   sum_x N_x t(x) = T (each prompt's token spend proportional to its weight), floors, then one more sample to the
   largest remainders while the spend stays within T;
2) `signal`: the greedy of `est.greedy_allocate` on the gain of each further sample per token, taking increments
   while they fit in T (exact for the fractional problem; the integer one may leave a remainder unspent).
`knapsack` and `remainder` keep their sample budgets (refused with tokens: the released rules price samples).
Source and departure: DUET (arXiv 2605.08441) allocates rollouts per prompt under a shared token budget with a
learned pre-rollout surrogate of each prompt's informativeness and cost; here the informativeness is Est's own rule
and the cost the memory's length EMA (no surrogate), and DUET's early abort is a separate lever
(`sampling.length`, cancelled samples counted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError

BUDGET_UNITS = ("samples", "tokens")
PRICED = ("inv_sqrt", "variance", "objective", "signal")
"""The allocation rules a token budget applies to (module docstring)."""


def check_priced(allocation: str, unit: str) -> None:
    if unit == "tokens" and allocation not in PRICED:
        raise ConfigError(
            f"budget_unit='tokens' applies to allocation {', '.join(PRICED)}; allocation={allocation!r} prices "
            "samples (set budget_unit=samples)"
        )


def proportional(weights: np.ndarray, costs: np.ndarray, tokens: float, lo: int, hi: int) -> np.ndarray:
    """Module docstring, 1: integers N_x in [lo, hi] with sum_x N_x t_x at most `tokens` (at least the clips').

    >>> proportional(np.array([1.0, 1.0]), np.array([10.0, 1.0]), 44.0, 1, 32).tolist()  # equal token spend
    [2, 22]
    """
    w, t = np.asarray(weights, dtype=float), np.maximum(np.asarray(costs, dtype=float), 1e-9)
    if not len(w):
        return np.zeros(0, dtype=int)

    def spend(c: float) -> float:
        return float((np.clip(c * w / t, lo, hi) * t).sum())

    target = min(max(tokens, spend(0.0)), spend(float("inf")) if np.all(w > 0) else float(hi * t.sum()))
    c_lo, c_hi = 0.0, 1.0
    while spend(c_hi) < target and c_hi < 1e300:
        c_hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (c_lo + c_hi)
        c_lo, c_hi = (mid, c_hi) if spend(mid) < target else (c_lo, mid)
    x = np.clip(c_lo * w / t, lo, hi)
    n = np.floor(x).astype(int)
    left = target - float((n * t).sum())
    for i in np.lexsort((np.arange(len(w)), -(x - n))):  # largest remainders first while the spend fits
        if n[i] < hi and t[i] <= left + 1e-9:
            n[i] += 1
            left -= t[i]
    return n


def greedy(gain_BK: np.ndarray, costs: np.ndarray, tokens: float, lo: int) -> np.ndarray:
    """Module docstring, 2: `lo` each, then the increments of the highest gain per token that fit."""
    b, k = gain_BK.shape
    t = np.maximum(np.asarray(costs, dtype=float), 1e-9)
    n = np.full(b, lo, dtype=int)
    left = tokens - lo * float(t.sum())
    ratio = (gain_BK / t[:, None]).ravel()
    for flat in np.lexsort((np.arange(ratio.size), -ratio)):
        x = flat // k
        if flat % k == n[x] - lo and t[x] <= left + 1e-9:  # a prompt's increments in order (gains non-increasing)
            n[x] += 1
            left -= t[x]
    return n


def priced_counts(p_hat: np.ndarray, opts: Any, budget: int, costs: np.ndarray, weights: Any, gains: Any) -> Any:
    """Est's counts for one batch under a token budget (`weights`, `gains`: Est's rule's weights and the signal
    gains, as callables of p_hat)."""
    tokens = budget * float(np.mean(costs)) if len(costs) else 0.0
    if opts.allocation == "signal":
        return greedy(gains(p_hat, opts.min_samples, opts.max_samples), costs, tokens, opts.min_samples)
    return proportional(weights(p_hat, opts), costs, tokens, opts.min_samples, opts.max_samples)
