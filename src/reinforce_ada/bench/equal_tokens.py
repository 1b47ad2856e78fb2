"""Held-out accuracy at equal generated tokens: every arm run to the same token budget, read against the best uniform
arm (pure numpy; records are `bench.run` results of one pool, run with `compare`'s `token_budget`).

Compute to target (`bench.compute`) asks how fast an arm climbs; this asks where it stands when the bill is the same,
so an arm that climbs no faster but plateaus higher shows here too.
1) An arm's level at the budget B is the mean of its evaluations with generated tokens from (1 - WINDOW) B on (the
   plateau's average, not one noisy evaluation; a run stops at the first step past B, so its last evaluation is
   there); a run that stopped short of (1 - WINDOW) B has none (counted as missing). Tokens include an arm's prior
   pass (`bench.run.prior_pass`), so a prior bought with samples is charged.
2) The best uniform arm is the one among `uniform` with the highest mean level over its seeds: chosen after seeing
   the data, which flatters the reference, so every difference against it is conservative for the other arms.
3) Each arm's difference to it is paired by seed (the same seed: the same start, prompts and pool), with the mean
   and a 90% t-interval over the seeds (honest at 9 seeds), and the per-seed values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.bench.curves import T_95

WINDOW = 0.2
"""The tail of the budget whose evaluations are averaged into an arm's level (module docstring, 1)."""


def level_at(record: dict[str, Any], budget: float, window: float = WINDOW) -> float | None:
    """The run's held-out accuracy at `budget` tokens (module docstring, 1), or None if it stopped before the tail.

    >>> level_at({"eval_tokens": [0, 40, 80, 100], "accuracy": [0.1, 0.2, 0.3, 0.5]}, 100)
    0.4
    """
    x = np.asarray(record["eval_tokens"], dtype=float)
    y = np.asarray(record["accuracy"], dtype=float)
    tail = x >= (1.0 - window) * budget  # a run ends at the first step past the budget: its last evaluation is in
    return float(y[tail].mean()) if tail.any() else None


def mean_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """90% t-interval of a mean (None, None below 2 values).

    >>> [round(v, 4) for v in mean_interval([0.01, 0.03])]  # mean 0.02, se 0.01, t(1) 6.314
    [-0.0431, 0.0831]
    """
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n < 2:
        return None, None
    t = T_95[n - 2] if n - 1 <= len(T_95) else 1.645
    half = t * float(v.std(ddof=1)) / np.sqrt(n)
    return float(v.mean() - half), float(v.mean() + half)


def table(records: Sequence[dict[str, Any]], uniform: Sequence[str], budget: float) -> dict[str, Any]:
    """Every arm's level at `budget` and its paired difference to the best uniform arm (module docstring)."""
    levels: dict[str, dict[int, float | None]] = defaultdict(dict)
    for r in records:
        levels[r["arm"]][int(r["seed"])] = level_at(r, budget)
    means = {a: float(np.mean(v)) for a, by in levels.items() if (v := [x for x in by.values() if x is not None])}
    present = [u for u in uniform if u in means]
    if not present:
        raise ValueError(f"no uniform arm of {list(uniform)} reached the budget's tail ({budget:g} tokens)")
    best = max(present, key=means.__getitem__)
    out: dict[str, Any] = {"budget_tokens": budget, "window": WINDOW, "best_uniform": best, "arms": {}}
    for arm, by_seed in levels.items():
        paired = {
            s: v - levels[best][s] for s, v in by_seed.items() if v is not None and levels[best].get(s) is not None
        }
        lo, hi = mean_interval(list(paired.values()))
        out["arms"][arm] = {
            "level": means.get(arm),
            "levels": {str(s): v for s, v in sorted(by_seed.items())},
            "diff": float(np.mean(list(paired.values()))) if paired else None,
            "diff_interval": [lo, hi],
            "diff_per_seed": {str(s): d for s, d in sorted(paired.items())},
            "missing_seeds": sorted(s for s, v in by_seed.items() if v is None),
        }
    return out
