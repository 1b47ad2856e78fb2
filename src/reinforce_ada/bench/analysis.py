"""From run records to the comparison table (pure: records in, numbers out).

Per pool, every arm is read against the reference (GRPO-n4) of the same seed:
1) `k_steps`: the time-scale factor on RL steps (`curves.scale_factor`), geometric mean over seeds with a 90%
   seed-bootstrap interval; `k_tokens`: the same on cumulative generated tokens; `area`: the curve-area ratio.
2) Steps and tokens to targets fixed in advance: `TARGETS` of the reference's gain (its median fitted gain over its
   whole, longer run), interpolated on each seed's fitted curve; medians count a seed that never reached as +inf.
3) Per-step shares and times (no-signal share, samples, tokens, step seconds) cover the reference's first `steps`
   only, the same stretch of training as the other arms'. A compact record (its series reduced to their statistics
   over the first `steps`, `head_stat`) reads the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.bench.curves import (
    area_gain,
    area_ratio,
    isotonic,
    median_with_misses,
    paired_factor,
    scale_factor,
    to_target,
)

TARGETS = (0.25, 0.5, 0.75)
"""Steps/tokens-to-target levels: fractions of the reference's gain, fixed before any run."""


def _by_arm(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        out[r["arm"]][r["seed"]] = r
    return out


def _curve(r: dict[str, Any], x: str = "eval_step") -> tuple[list[float], list[float]]:
    return r[x], r["accuracy"]


STATS = {"mean": np.mean, "nanmean": np.nanmean, "median": np.median}
"""The statistics a table reads of a per-step series (a compact record keeps these, not the series)."""


def head_stat(r: dict[str, Any], key: str, steps: int, stat: str) -> float:
    """`stat` (one of `STATS`) of the record's series `key` over its first `steps` steps. A compact record, whose
    series were reduced when it was stored, carries the values as `head = {"steps": H, stat: {key: value}}`, read
    when H == steps (the same numbers: they were computed by this function from the full series)."""
    if key in r:
        return float(STATS[stat](r[key][:steps]))
    head = r.get("head") or {}
    if head.get("steps") == steps and key in head.get(stat, {}):
        return float(head[stat][key])
    raise KeyError(f"run {r.get('key')}: no series {key!r} and no stored {stat} of its first {steps} steps")


def _med(xs: Sequence[float | None]) -> dict[str, Any]:
    v = [x for x in xs if x is not None and np.isfinite(x)]
    if not v:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": float(np.median(v)), "min": float(min(v)), "max": float(max(v)), "n": len(v)}


def _factor(arm: dict[int, dict], ref: dict[int, dict], x: str) -> dict[str, Any]:
    seeds = sorted(set(arm) & set(ref))
    ks = [scale_factor(_curve(ref[s], x), _curve(arm[s], x)) for s in seeds]
    out = paired_factor([k["k"] for k in ks])
    out["seeds"] = seeds
    out["shared_gain_share"] = _med([k["ref_gain_share"] for k in ks])["median"]
    return out


def identical_arms(arms: dict[str, dict[int, dict[str, Any]]]) -> dict[str, list[str]]:
    """Arms whose runs are the same on every seed they share (accuracy and tokens at every evaluation): such arms
    did the same thing (e.g. a rule that never fired), so their differences are seed selection, not method; they are
    flagged, not ranked against each other."""
    names = sorted(arms)
    out: dict[str, list[str]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = sorted(set(arms[a]) & set(arms[b]))
            same = shared and all(
                arms[a][s]["accuracy"] == arms[b][s]["accuracy"]
                and arms[a][s].get("eval_tokens") == arms[b][s].get("eval_tokens")
                for s in shared
            )
            if same:
                out.setdefault(a, []).append(b)
                out.setdefault(b, []).append(a)
    return out


def summarize_pool(records: Sequence[dict[str, Any]], reference: str, matched: str | None, steps: int) -> dict:
    """The per-arm table of one pool's main runs (keys: arm names)."""
    arms = _by_arm(records)
    ref = arms[reference]
    start = float(np.median([r["accuracy"][0] for r in ref.values()]))
    ref_gain = float(np.median([isotonic(r["accuracy"])[-1] - r["accuracy"][0] for r in ref.values()]))
    levels = [start + f * ref_gain for f in TARGETS]
    twins = identical_arms(arms)
    table: dict[str, Any] = {}
    for name, runs in arms.items():
        seeds = sorted(runs)
        first = runs[seeds[0]]
        reach_steps = [to_target(*_curve(runs[s]), levels) for s in seeds]
        reach_tokens = [to_target(*_curve(runs[s], "eval_tokens"), levels) for s in seeds]
        row: dict[str, Any] = {
            "spec": first.get("spec"),
            "lr": first["lr"],
            "seeds": seeds,
            "steps": first["steps"],
            "k_steps": _factor(runs, ref, "eval_step"),
            "k_tokens": _factor(runs, ref, "eval_tokens"),
            "area": paired_factor(
                [area_ratio(_curve(ref[s]), _curve(runs[s]), common=True) if s in ref else None for s in seeds]
            ),
            "targets": {
                f"{f:g}": {
                    "level": lv,
                    "steps": median_with_misses([r[i] for r in reach_steps]),
                    "tokens": median_with_misses([r[i] for r in reach_tokens]),
                    "reached": sum(r[i] is not None for r in reach_steps),
                }
                for i, (f, lv) in enumerate(zip(TARGETS, levels, strict=True))
            },
            "final_accuracy": _med([float(np.interp(steps, *_curve(runs[s]))) for s in seeds]),
            "end_accuracy": _med([runs[s]["accuracy"][-1] for s in seeds]),
            "area_gain": _med([area_gain(*_curve(runs[s]), horizon=steps) for s in seeds]),
            "no_signal_share": _med([head_stat(runs[s], "no_signal_share", steps, "mean") for s in seeds]),
            "zero_adv_share": _med([head_stat(runs[s], "zero_adv_share", steps, "nanmean") for s in seeds]),
            "samples_per_step": _med([head_stat(runs[s], "samples_per_step", steps, "mean") for s in seeds]),
            "tokens_per_step": _med([head_stat(runs[s], "tokens_per_step", steps, "mean") for s in seeds]),
            "time_step_s": _med([head_stat(runs[s], "time_step_s", steps, "median") for s in seeds]),
            "time_generate_s": _med([head_stat(runs[s], "time_generate_s", steps, "median") for s in seeds]),
            "time_train_s": _med([head_stat(runs[s], "time_train_s", steps, "median") for s in seeds]),
            "final_per_level": {
                lv: float(
                    np.median([float(np.interp(steps, runs[s]["eval_step"], runs[s]["per_level"][lv])) for s in seeds])
                )
                for lv in first["per_level"]
            },
            "sampled_minus_exact": _med(
                [
                    runs[s]["sampled_check"]["sampled"] - runs[s]["sampled_check"]["exact"]
                    for s in seeds
                    if "sampled_check" in runs[s]
                ]
            ),
        }
        if matched and matched in arms:
            row["k_tokens_vs_matched"] = _factor(runs, arms[matched], "eval_tokens")
        row["identical_to"] = twins.get(name, [])
        table[name] = row
    return {"start_accuracy": start, "reference_gain": ref_gain, "target_levels": levels, "table": table}


def choose_lrs(records: Sequence[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Each arm's sweep: mean curve-area gain per lr over the sweep seeds, and the best lr."""
    by: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by[r["arm"]][r["lr"]].append(area_gain(*_curve(r), horizon=steps))
    out = {}
    for arm, lrs in by.items():
        score = {lr: float(np.mean(v)) for lr, v in sorted(lrs.items())}
        best = max(score, key=lambda lr: score[lr])
        grid = sorted(score)
        out[arm] = {
            "area_gain": {f"{lr:g}": s for lr, s in score.items()},
            "best": best,
            "at_edge": best in (grid[0], grid[-1]) and len(grid) > 1,
        }
    return out


def grow_grid(
    grids: dict[str, dict[str, tuple[float, ...]]], choice: dict[str, dict[str, Any]], *, may_grow: bool = True
) -> tuple[dict[str, dict[str, tuple[float, ...]]], list[str]]:
    """One round of the lr sweep's growth: each arm whose best lr (`choose_lrs`) sits at its grid's edge gets one lr
    beyond it (twice the top, or half the bottom); returns the grids and what grew ("pool/arm +lr"). A grown grid is
    its lrs sorted with the new one last, an untouched grid keeps its order: a registered study's job keys read the
    grid in this order. Pure and standard-library only (`studies.protocol.jobrunner` reads it under older commits).
    """
    grids = {pool: dict(arms) for pool, arms in grids.items()}
    grown = []
    for pool, arms_choice in choice.items():
        for arm, ch in arms_choice.items():
            grid = sorted(grids[pool][arm])
            if ch["at_edge"] and may_grow:
                new = grid[-1] * 2 if ch["best"] == grid[-1] else grid[0] / 2
                grids[pool][arm] = (*grid, new)
                grown.append(f"{pool}/{arm} +{new:g}")
    return grids, grown
