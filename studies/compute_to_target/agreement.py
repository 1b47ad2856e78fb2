"""Does a re-run with other seeds agree with its first run? The compute-to-target study's agreement statistics.

1) `rerun_agreement(first, second)`: per arm and cost axis, both runs' factors with their 90% t-intervals, whether
   the intervals overlap and whether the re-run's factor lies in the first run's interval (the registered criterion
   reads these), with `chance_apart`'s chances of each under seed noise alone.
2) `noise_quantile`: how many apart pairs seed noise explains at a level, cells taken as independent (the amended
   criterion); `joint_null`: the same with whole seeds shuffled between the runs, the links between cells kept.
Pure numpy over `bench.compute.summarize` tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.bench.compute import AXES
from reinforce_ada.bench.curves import T_95


def rerun_agreement(first: dict[str, Any], second: dict[str, Any], axes: Sequence[str] = AXES) -> dict[str, Any]:
    """Does a re-run with other seeds agree with the first run? Both are one pool's `bench.compute.summarize` output.
    (Not `protocol.goals.agreement`, which compares two compare runs' goal verdicts.)

    Per arm and axis: both factors with their 90% t-intervals, `overlap` (the intervals share a point) and `inside`
    (the re-run's factor lies in the first run's interval). The re-run is read against its own best uniform arm on
    each axis, so a change of best uniform arm is reported (`best_uniform`) rather than hidden. The summary counts
    cells where both runs have an interval; an arm missing from either run is listed, not counted."""
    rows: dict[str, Any] = {}
    counts = {"cells": 0, "overlap": 0, "inside": 0}
    missing = sorted(set(first["table"]) ^ set(second["table"]))
    for arm in sorted(set(first["table"]) & set(second["table"])):
        row = {}
        for axis in axes:
            a, b = first["table"][arm].get(axis), second["table"][arm].get(axis)
            if not a or not b or None in (a.get("t_lo"), a.get("t_hi"), b.get("t_lo"), b.get("t_hi"), b.get("value")):
                continue
            overlap = a["t_lo"] <= b["t_hi"] and b["t_lo"] <= a["t_hi"]
            inside = a["t_lo"] <= b["value"] <= a["t_hi"]
            row[axis] = {
                "first": [a["value"], a["t_lo"], a["t_hi"]],
                "rerun": [b["value"], b["t_lo"], b["t_hi"]],
                "overlap": bool(overlap),
                "inside": bool(inside),
                **chance_apart(a.get("per_seed") or [], b.get("per_seed") or []),
            }
            counts["cells"] += 1
            counts["overlap"] += int(overlap)
            counts["inside"] += int(inside)
        rows[arm] = row
    best = {
        axis: [first["axes"].get(axis, {}).get("best_uniform"), second["axes"].get(axis, {}).get("best_uniform")]
        for axis in axes
    }
    for key in ("apart", "inside"):
        chances = [
            c[f"p_{key}_if_same"] for r in rows.values() for c in r.values() if c[f"p_{key}_if_same"] is not None
        ]
        counts[f"expected_{key}_if_same"] = round(float(sum(chances)), 2) if chances else None
    return {"arms": rows, "counts": counts, "best_uniform": best, "missing_arms": missing}


def chance_apart(first: Sequence[float | None], second: Sequence[float | None], draws: int = 2000) -> dict[str, Any]:
    """How often two runs' 90% t-intervals are apart (`p_apart_if_same`), and how often the re-run's factor falls
    inside the first run's interval (`p_inside_if_same`), when both runs measure the same thing: the per-seed factors
    of both runs pooled and split again at random into runs of the same sizes (a permutation of seed labels), `draws`
    times (fixed generator, so deterministic). Summed over cells they are the counts to expect from seed noise alone --
    the yardstick for a criterion that asks every one of many pairs to overlap. None without >= 2 positive factors
    per run. (Not pre-registered: a reading added after the first re-run.)"""
    a = [float(v) for v in first if v is not None and v > 0]
    b = [float(v) for v in second if v is not None and v > 0]
    if len(a) < 2 or len(b) < 2:
        return {"p_apart_if_same": None, "p_inside_if_same": None}

    logs, n = np.log(np.asarray(a + b)), len(a)
    perms = np.argsort(np.random.default_rng(0).random((draws, len(logs))), axis=1)
    (lo1, hi1, _), (lo2, hi2, m2) = row_intervals(logs[perms[:, :n]]), row_intervals(logs[perms[:, n:]])
    return {
        "p_apart_if_same": round(float(np.mean((lo1 > hi2) | (lo2 > hi1))), 4),
        "p_inside_if_same": round(float(np.mean((lo1 <= m2) & (m2 <= hi1))), 4),
    }


def row_intervals(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of log factors (NaN = a seed without one): the 90% t-interval's ends and the mean, as
    `curves.t_interval` computes them for one row (NaN where a row has fewer than two values)."""
    n = np.sum(~np.isnan(logs), axis=1)
    t_of = np.array([np.nan, np.nan, *T_95, *[1.645] * max(0, logs.shape[1] - len(T_95) - 1)])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(logs, axis=1) if logs.shape[1] else np.full(len(logs), np.nan)
        sd = np.sqrt(np.nansum((logs - mean[:, None]) ** 2, axis=1) / (n - 1))
        half = t_of[n] * sd / np.sqrt(n)
    return mean - half, mean + half, mean


def noise_quantile(chances: Sequence[float], level: float = 0.95) -> int:
    """The `level` quantile of how many of independent events with these chances happen (Poisson-binomial, exact by
    dynamic programming): the most apart pairs seed noise alone explains at that level.

    >>> noise_quantile([0.5, 0.5], 0.75), noise_quantile([0.5, 0.5], 0.76), noise_quantile([], 0.95)
    (1, 2, 0)
    """
    dist = np.array([1.0])
    for p in chances:
        dist = np.append(dist * (1 - p), 0.0) + np.append(0.0, dist * p)
    return int(np.searchsorted(np.cumsum(dist), level - 1e-12))


def joint_null(
    first: dict[str, Any],
    second: dict[str, Any],
    claimed: Sequence[str] = (),
    shift_arms: Sequence[str] = (),
    axes: Sequence[str] = AXES,
    draws: int = 1000,
    level: float = 0.95,
) -> dict[str, Any] | None:
    """What seed noise alone does to a re-run's agreement counts, with the links between cells kept: whole seeds (every
    arm's and axis's factor of that seed together) are shuffled between the two runs, so the shared reference runs and
    the near-equal axes (tokens, gpu_s) move together, as they do between real runs. `chance_apart` reads cells one
    at a time and `noise_quantile` treats them as independent, which under-states the spread (found in review after
    the re-runs of `hard` and `small`; not pre-registered). `first` and `second` are the runs' `table`s.

    Returns the distinct cells' apart count under shuffling (mean and `level` quantile), P(no cell apart), P(the
    registered criterion passes: no cell apart and every claimed arm's re-run tokens factor inside the first
    interval), and per arm of `claimed` and `shift_arms` a permutation p-value for the shift of its tokens factor
    (|difference of mean log factors| at least the observed one). None without cells that have per-seed factors of
    equal counts."""
    from collections import Counter

    cells: dict[tuple, tuple[list[str], str, list, list]] = {}  # identical arms share one cell, every name kept
    for arm in sorted(set(first) & set(second)):
        for axis in axes:
            a, b = first[arm].get(axis) or {}, second[arm].get(axis) or {}
            pa, pb = a.get("per_seed"), b.get("per_seed")
            if pa and pb and a.get("t_lo") is not None and b.get("t_lo") is not None:
                cells.setdefault((axis, tuple(pa), tuple(pb)), ([], axis, list(pa), list(pb)))[0].append(arm)
    if not cells:
        return None
    (n1, n2), _ = Counter((len(c[2]), len(c[3])) for c in cells.values()).most_common(1)[0]
    cells = {k: c for k, c in cells.items() if len(c[2]) == n1 and len(c[3]) == n2}  # seeds aligned by position
    perms = np.argsort(np.random.default_rng(0).random((draws, n1 + n2)), axis=1)
    apart = np.zeros(draws, dtype=int)
    inside = np.ones(draws, dtype=bool)
    shift_p: dict[str, float] = {}
    for names, axis, pa, pb in cells.values():
        logs = np.array([np.log(v) if v is not None and v > 0 else np.nan for v in pa + pb])
        x = logs[perms]
        (lo1, hi1, m1), (lo2, hi2, m2) = row_intervals(x[:, :n1]), row_intervals(x[:, n1:])
        with np.errstate(invalid="ignore"):
            apart += (lo1 > hi2) | (lo2 > hi1)
            if axis == "tokens" and set(names) & set(claimed):
                inside &= (lo1 <= m2) & (m2 <= hi1)
            for arm in (a for a in names if axis == "tokens" and (a in claimed or a in shift_arms)):
                seen = abs(np.nanmean(logs[:n1]) - np.nanmean(logs[n1:]))
                shift_p[arm] = round(float(np.mean(np.abs(m1 - m2) >= seen - 1e-12)), 4)
    return {
        "draws": draws,
        "distinct_cells": len(cells),
        "apart_mean": round(float(apart.mean()), 2),
        "apart_quantile": int(np.quantile(apart, level, method="inverted_cdf")),
        "level": level,
        "p_none_apart": round(float(np.mean(apart == 0)), 3),
        "p_registered_passes": round(float(np.mean((apart == 0) & inside)), 3),
        "claimed_shift_p": shift_p,
        "not_preregistered": True,
    }
