"""Learning-curve statistics for `reinforce-ada compare`: pure numpy, no I/O.

A curve is `(x, y)`: x = RL steps (or cumulative generated tokens) at each evaluation, starting at 0 and increasing;
y = held-out accuracy there. Two arms of the same seed start from the same model, so they share `y[0]`.

1) `isotonic(y)`: the least-squares non-decreasing fit (pool adjacent violators). Crossing times are read off it,
   so a noisy upward blip cannot count as "reached" and a fall-back cannot un-reach.
2) `crossing(x, y, level)`: the first x at which the isotonic fit, linearly interpolated between evaluations,
   reaches `level` (None if it never does). Interpolation removes the evaluation grid from every measure. Given the
   step counts (`steps`), it is read at the first step end past that point instead: a sensitivity reading for arms
   whose steps are long against the evaluation interval, which the straight line credits with about half a step.
3) `scale_factor(ref, arm)`: the time-scale factor k with arm(x) ~ ref(k * x) over the accuracy range both curves
   cover. For accuracy levels y_j at fixed fractions of the shared gain (from the common start to the lower of the
   two fitted maxima) it takes the geometric mean of x_ref(y_j) / x_arm(y_j). k = 2 means the arm reaches every
   shared accuracy in half the steps (tokens) the reference needs. The reference may run longer than the arm, so a
   faster arm's range is covered without reading the reference at its plateau.
4) `area_ratio(ref, arm)`: the learning-curve area above the start, arm over reference, both over the arm's
   horizon (trapezoids on the raw curves): a second, model-free measure that rewards both speed and level.
5) `bootstrap(n, stat)`: a percentile interval from resampling seeds with replacement. Paired statistics resample
   seed indices, so each resample keeps an arm's seed with the reference's same seed. With few seeds a percentile
   bootstrap cannot reach beyond the extreme seeds, so `paired_factor` also gives a t-interval on the log factors
   (`t_interval`), honest at small n; report both beside the per-seed values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

SCALE_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Where along the shared gain k is read (fixed in advance; the ends are left out: near the start x is a fraction of
one evaluation interval, near the top a plateau makes the crossing ill-defined)."""


def isotonic(y: Sequence[float]) -> np.ndarray:
    """Least-squares non-decreasing fit of `y` (equal weights).

    >>> isotonic([0.1, 0.3, 0.2, 0.4]).round(3).tolist()
    [0.1, 0.25, 0.25, 0.4]
    """
    blocks: list[list[float]] = []  # [sum, count]
    for v in map(float, y):
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks]) if blocks else np.zeros(0)


def _check(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.ndim != 1 or xa.shape != ya.shape or len(xa) < 2:
        raise ValueError(f"a curve needs matching 1-d x and y with at least 2 points, got {xa.shape} and {ya.shape}")
    if np.any(np.diff(xa) <= 0):
        raise ValueError("a curve's x must be strictly increasing")
    return xa, ya


def crossing(
    x: Sequence[float], y: Sequence[float], level: float, *, fitted: bool = False, steps: Sequence[int] | None = None
) -> float | None:
    """First x where the (isotonic, unless `fitted`) curve reaches `level`, interpolated; None if it never does.

    With `steps` (the RL step count at each evaluation) the crossing is read at a step end: the policy changes only
    when a step ends, so between two evaluations k steps apart (each taken to cost the same) the curve is a staircase
    of k treads, and the level is reached at the first step end at or past the straight line's crossing. Without it,
    the straight line credits an arm with about half a step per crossing: a sensitivity reading, where the steps are
    long against the evaluation interval.

    >>> round(crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3), 6)
    15.0
    >>> round(crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 1, 3]), 6)  # steps of 5 from x = 10
    15.0
    >>> round(crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 1, 2]), 6)  # one step: reached at its end
    20.0
    """
    xa, ya = _check(x, y)
    f = ya if fitted else isotonic(ya)
    hit = np.nonzero(f >= level)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(xa[0])
    x0, x1, y0, y1 = xa[i - 1], xa[i], f[i - 1], f[i]
    if steps is None:
        return float(x0 + (x1 - x0) * (level - y0) / (y1 - y0))  # this order: every committed result reads it
    share = (level - y0) / (y1 - y0)
    if len(steps) != len(xa):
        raise ValueError(f"steps has {len(steps)} entries for a curve of {len(xa)} evaluations")
    k = int(steps[i]) - int(steps[i - 1])
    if k < 1:
        raise ValueError(f"steps must increase between evaluations; got {steps[i - 1]} then {steps[i]}")
    return float(x0 + (x1 - x0) * np.ceil(share * k - 1e-9) / k)


def scale_factor(
    ref: tuple[Sequence[float], Sequence[float]],
    arm: tuple[Sequence[float], Sequence[float]],
    fractions: Sequence[float] = SCALE_FRACTIONS,
    *,
    min_gain: float = 1e-4,
    steps: tuple[Sequence[int], Sequence[int]] | None = None,
) -> dict[str, float | None]:
    """k with arm(x) ~ ref(k x) over the shared accuracy range; None where the two curves share less than `min_gain`.
    With `steps` (the reference's and the arm's step counts at each evaluation) every crossing is read at a step end
    (`crossing`).

    Returns `k`, the shared range (`start`, `top`) and `ref_gain_share`: the shared gain over the reference's own
    (1.0 when the arm gets at least as high as the reference).
    """
    (xr, yr), (xa, ya) = _check(*ref), _check(*arm)
    fr, fa = isotonic(yr), isotonic(ya)
    start = 0.5 * (fr[0] + fa[0])
    top = min(fr[-1], fa[-1])
    out: dict[str, float | None] = {"k": None, "start": float(start), "top": float(top), "ref_gain_share": None}
    if fr[-1] - start > 0:
        out["ref_gain_share"] = float((top - start) / (fr[-1] - start))
    if top - start < min_gain:
        return out
    logs = []
    for f in fractions:
        level = start + f * (top - start)
        sr, sa = steps if steps is not None else (None, None)
        t_ref, t_arm = crossing(xr, fr, level, fitted=True, steps=sr), crossing(xa, fa, level, fitted=True, steps=sa)
        if t_ref and t_arm:  # both > 0: a level the start already meets says nothing about speed
            logs.append(np.log(t_ref / t_arm))
    out["k"] = float(np.exp(np.mean(logs))) if logs else None
    return out


def area_ratio(
    ref: tuple[Sequence[float], Sequence[float]],
    arm: tuple[Sequence[float], Sequence[float]],
    *,
    common: bool = False,
) -> float | None:
    """Area above the start under the arm's curve over the reference's, both on [0, the arm's last x]; `common`:
    on [0, the shorter curve's last x] (runs to a token budget end at different steps, the reference sometimes
    first)."""
    (xr, yr), (xa, ya) = _check(*ref), _check(*arm)
    horizon = min(xa[-1], xr[-1]) if common else xa[-1]
    if xr[-1] < horizon:
        raise ValueError(f"the reference ends at x={xr[-1]:g}, before the arm's horizon {horizon:g}")
    start = 0.5 * (yr[0] + ya[0])
    grid = np.union1d(xa[xa <= horizon], xr[xr <= horizon])
    a_ref = np.trapezoid(np.interp(grid, xr, yr) - start, grid)
    a_arm = np.trapezoid(np.interp(grid, xa, ya) - start, grid)
    return float(a_arm / a_ref) if a_ref > 0 else None


def area_gain(x: Sequence[float], y: Sequence[float], horizon: float | None = None) -> float:
    """Mean accuracy gain over the start on [0, horizon] (default: the curve's end): the lr sweep's criterion."""
    xa, ya = _check(x, y)
    h = xa[-1] if horizon is None else float(horizon)
    grid = np.union1d(xa[xa <= h], [h])
    return float(np.trapezoid(np.interp(grid, xa, ya) - ya[0], grid) / h)


def bootstrap(
    n: int, stat: Callable[[np.ndarray], float | None], *, level: float = 0.9, reps: int = 4000, seed: int = 0
) -> tuple[float | None, float | None]:
    """Percentile interval of `stat(indices)` over `reps` resamples of `range(n)` with replacement.

    Resamples where `stat` is None (undefined) are left out; (None, None) if more than a tenth are.
    """
    if n < 1:
        return None, None
    rng = np.random.default_rng(seed)
    vals = [stat(rng.integers(0, n, n)) for _ in range(reps)]
    ok = np.array([v for v in vals if v is not None and np.isfinite(v)], dtype=float)
    if len(ok) < 0.9 * reps:
        return None, None
    tail = (1 - level) / 2
    return float(np.quantile(ok, tail)), float(np.quantile(ok, 1 - tail))


T_95 = (
    6.314,
    2.920,
    2.353,
    2.132,
    2.015,
    1.943,
    1.895,
    1.860,
    1.833,
    1.812,
    1.796,
    1.782,
    1.771,
    1.761,
    1.753,
    1.746,
    1.740,
    1.734,
    1.729,
    1.725,
    1.721,
    1.717,
    1.714,
    1.711,
    1.708,
    1.706,
    1.703,
    1.701,
    1.699,
    1.697,
)
"""Student t's 95th percentile for 1...30 degrees of freedom (a two-sided 90% interval); 1.645 beyond."""


def t_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """90% t-interval of the geometric mean of positive factors: exp(mean(log v) +- t_{0.95, n-1} sd / sqrt(n)).

    >>> [round(x, 3) for x in t_interval([np.e, np.e**3])]  # mean log 2, sd sqrt(2), se 1, t(1) 6.314
    [0.013, 4080.603]
    """
    logs = np.log(np.asarray(values, dtype=float))
    n = len(logs)
    if n < 2:
        return None, None
    t = T_95[n - 2] if n - 1 <= len(T_95) else 1.645
    half = t * float(np.std(logs, ddof=1)) / np.sqrt(n)
    m = float(np.mean(logs))
    return float(np.exp(m - half)), float(np.exp(m + half))


def geo_mean(values: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def _bootstrap_geo_mean(arr: np.ndarray, *, level: float, seed: int, reps: int = 4000) -> tuple[float, float]:
    """`bootstrap(len(arr), lambda i: geo_mean(arr[i]))` in one draw: the same resamples (the generator's stream
    fills a (reps, n) array as it fills reps arrays of n) and the same interval, 80x faster."""
    rng = np.random.default_rng(seed)
    vals = np.exp(np.log(arr)[rng.integers(0, len(arr), (reps, len(arr)))].mean(axis=1))
    tail = (1 - level) / 2
    return float(np.quantile(vals, tail)), float(np.quantile(vals, 1 - tail))


def paired_factor(per_seed: Sequence[float | None], *, level: float = 0.9, seed: int = 0) -> dict[str, object]:
    """Geometric mean of per-seed factors (k or area ratios) with a seed-bootstrap interval.

    Seeds where the factor is undefined are listed (`undefined`) and left out; a factor <= 0 (an arm that lost
    ground) makes the geometric mean undefined, so the median is given too.
    """
    vals = [v for v in per_seed if v is not None]
    out: dict[str, object] = {
        "per_seed": list(per_seed),
        "undefined": len(per_seed) - len(vals),
        "median": float(np.median(vals)) if vals else None,
    }
    if not vals or min(vals) <= 0:
        out.update(value=None, lo=None, hi=None, t_lo=None, t_hi=None)
        return out
    arr = np.asarray(vals, dtype=float)
    lo, hi = _bootstrap_geo_mean(arr, level=level, seed=seed)
    t_lo, t_hi = t_interval(arr)
    out.update(value=geo_mean(arr), lo=lo, hi=hi, t_lo=t_lo, t_hi=t_hi)
    return out


def ratio_of_means(
    num: Sequence[float], den: Sequence[float], *, level: float = 0.9, seed: int = 0
) -> dict[str, float | None]:
    """mean(num) / mean(den) over paired seeds, with a seed-bootstrap interval (e.g. two arms' no-signal shares)."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.shape != b.shape or len(a) == 0:
        raise ValueError(f"need paired, non-empty samples, got {a.shape} and {b.shape}")

    def stat(i: np.ndarray) -> float | None:
        d = b[i].mean()
        return float(a[i].mean() / d) if d > 0 else None

    lo, hi = bootstrap(len(a), stat, level=level, seed=seed)
    return {"value": stat(np.arange(len(a))), "lo": lo, "hi": hi}


def to_target(x: Sequence[float], y: Sequence[float], levels: Sequence[float]) -> list[float | None]:
    """Interpolated x at which the isotonic curve first reaches each level (None: not reached)."""
    return [crossing(x, y, lv) for lv in levels]


def median_with_misses(values: Sequence[float | None]) -> float | None:
    """Median counting a miss (None) as +inf; None when the median itself is a miss."""
    if not values:
        return None
    full = sorted(v if v is not None else np.inf for v in values)
    m = float(np.median(full))
    return m if np.isfinite(m) else None
