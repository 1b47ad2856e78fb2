"""The study's figures from its runs (pure: compact runs in, numbers out; `regenerate` writes them).

Per pool, against the best uniform arm of the registered grid (n x prompts per step at matched samples per step):
1) compute to target (`bench.compute.summarize`): each arm's tokens, CPU-seconds and GPU-model-seconds factors, paired
   by seed, with their 90% t-intervals -- C1, C2 and C2g for the registered arm;
2) equal tokens (`bench.equal_tokens.table`): each arm's held-out accuracy at the token budget minus the best uniform
   arm's, paired by seed -- E1;
3) what the baseline buys (V1): per arm, the mean over its steps and seeds of |v_hat - p| (the tracker's value before
   the step against the exact pass rate under the policy that drew the samples) and of |group mean - p|;
4) how far the extended reference moves the old one: the best uniform arm of the 16-prompt family (the old
   reference's shape) against the grid's best, on tokens.
Each registered claim is read against its goal where it has one (`verdict`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from reinforce_ada.bench import compute, equal_tokens

ERROR_SERIES = ("value_abs_error", "group_mean_abs_error")
OLD_FAMILY = ("grpo-n2x16", "grpo-n4", "grpo-n8")
"""The uniform arms of the compute-to-target study's shape (16 prompts per step)."""


def value_errors(main: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: the mean over seeds of each run's mean value error and group-mean error (nan-aware)."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in main:
        errors = r.get("errors") or {  # a compact run carries its means; a full record its per-step series
            k: float(np.nanmean(r[k])) if r.get(k) and np.isfinite(r[k]).any() else None for k in ERROR_SERIES
        }
        for k, v in errors.items():
            if v is not None and np.isfinite(v):
                by[r["arm"]][k].append(v)
    return {arm: {k: float(np.mean(v)) for k, v in errs.items()} for arm, errs in by.items()}


def pool_figures(
    main: list[dict[str, Any]],
    sweep: list[dict[str, Any]],
    reg: dict[str, Any],
    *,
    uniform: list[str] | None = None,
    budget: float | None = None,
) -> dict[str, Any]:
    """One pool's figures (module docstring); `uniform` and `budget` default to the registration's (a scratch run of
    a smaller grid or budget passes its own)."""
    inst = reg["instrument"]
    uniform = list(uniform or inst["uniform"])
    summ = compute.summarize(main, sweep, uniform, (), fractions=inst.get("targets", compute.TARGETS))
    old = [u for u in OLD_FAMILY if u in {r["arm"] for r in main}]
    names = [a.partition("=")[0].strip() for a in inst["arms"]]
    seeds = {a: {int(r["seed"]) for r in main if r["arm"] == a} for a in names}
    out = {
        "complete": all(set(inst["seeds"]) <= seeds[a] for a in names),  # every arm, every seed: final figures
        "compute": summ,
        "equal_tokens": equal_tokens.table(main, uniform, budget or inst["token_budget"]),
        "value_errors": value_errors(main),
    }
    if old and "tokens" in summ["axes"]:
        arms = compute._by_arm(main)
        best_old, _ = compute.best_uniform(arms, old, "tokens")
        best = summ["axes"]["tokens"]["best_uniform"]
        out["old_reference"] = {
            "best_of_16_prompt_family": best_old,
            "best_of_grid": best,
            "grid_vs_old_on_tokens": compute.factor(arms[best], arms[best_old], "tokens") if best != best_old else None,
        }
    return out


def claims(by_pool: dict[str, Any], reg: dict[str, Any]) -> dict[str, Any]:
    """Each registered claim per pool: its figure (with interval) and, where a goal is numeric, a verdict."""
    out: dict[str, Any] = {}
    axis = {"C1": "tokens", "C2": "cpu_s", "C2g": "gpu_s"}
    for claim in reg.get("claim", []):
        fig, arm = claim["figure"], claim["arm"]
        rows = {}
        for pool, f in by_pool.items():
            if fig in axis:
                row = f["compute"]["table"].get(arm, {}).get(axis[fig], {})
                ref = f["compute"]["axes"].get(axis[fig], {}).get("best_uniform")
                rows[pool] = {k: row.get(k) for k in ("value", "t_lo", "t_hi", "per_seed", "seeds", "unpriced")} | {
                    "reference": ref,
                    "undefined": row.get("undefined") or 0,  # seeds whose curves share no gain: no factor
                }
                rows[pool]["verdict"] = verdict(fig, {pool: rows[pool]})
            elif fig == "E1":
                e = f["equal_tokens"]
                a = e["arms"].get(arm, {})
                rows[pool] = {"diff": a.get("diff"), "interval": a.get("diff_interval"), "reference": e["best_uniform"]}
            elif fig == "V1":
                rows[pool] = {
                    "tracker": f["value_errors"].get(arm, {}),
                    "grpo-n4": f["value_errors"].get("grpo-n4", {}),
                }
        out[fig] = {"arm": arm, "goal": claim.get("goal"), "by_pool": rows, "verdict": overall(fig, rows, by_pool, reg)}
    return out


def overall(figure: str, rows: dict[str, Any], by_pool: dict[str, Any], reg: dict[str, Any]) -> str | None:
    """A claim's verdict over the registered pools: "missed" as soon as a complete pool misses it (every goal holds
    on every pool), "incomplete" while a pool has no runs or is still running, else `verdict`."""
    v = verdict(figure, rows)
    if v is None:
        return None
    final = {p: r for p, r in rows.items() if by_pool.get(p, {}).get("complete")}
    if final and verdict(figure, final) == "missed":
        return "missed"
    if any(p not in final for p in reg["instrument"]["pools"]):
        return "incomplete"
    return v


def verdict(figure: str, rows: dict[str, Any]) -> str | None:
    """The registered goals of C1 (>= 1.5 with t_lo > 1 on every pool; >= 2.0 on default), C2 (>= 1.3) and C2g
    (>= 1.5) over the pools of `rows`; None for the figures registered without a goal. A seed without a factor
    (its curve never shares a gain with the reference's) counts against the goal: never "met" with one."""
    bounds = {"C1": 1.5, "C2": 1.3, "C2g": 1.5}
    if figure not in bounds or not rows:
        return None
    vals = {p: r.get("value") for p, r in rows.items()}
    if any(v is None for v in vals.values()):
        return "incomplete"
    ok = all(v >= bounds[figure] for v in vals.values()) and not any(r.get("undefined") for r in rows.values())
    if figure == "C1":
        ok = ok and all((r.get("t_lo") or 0) > 1 for r in rows.values()) and vals.get("default", 2.0) >= 2.0
    return "met" if ok else "missed"
