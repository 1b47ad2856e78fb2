"""The goals for the best adaptive arm, from the study's `compare` results (no training here; `regenerate` writes
results/allocator_goals.json and the P2_best/P2b_best/P3_best/P4_best entries of results/summary.json).

Reads `allocators_compare` (every allocator beside GRPO-n4 and budget-matched GRPO, same seeds and testbed) and
`convergence` (the DAPO arm, `dynamic:n=4`, run on the same testbed and seeds). For each
pool and goal the best adaptive arm is picked on the goal's own measure — so "best" differs between goals, and it
is picked after seeing the data (a selection effect the intervals do not cover; the pre-registered arm, seq-bal,
stays in P1-P4 beside it).

- P2_best: tokens to target, budget-matched GRPO / arm (k on tokens vs matched; ≥ 1.5).
- P2b_best: tokens to target, DAPO-n4 / arm = k_tokens(arm) / k_tokens(DAPO), both vs GRPO-n4 on the seeds the two
  files share (geometric mean over seeds, 90% seed bootstrap; ≥ 2.0).
- P3_best: no-signal share, arm / GRPO-n4 (ratio of seed means, 90% seed bootstrap; ≤ 0.20).
- P4_best: wall-clock per step, arm / GRPO-n4 (ratio of seed means of the per-run median; ≤ 1.3). The compare run
  timed its arms on a shared machine, not interleaved: read it as indicative.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from reinforce_ada.bench.curves import paired_factor, ratio_of_means

REFERENCE = ("grpo-n4", "grpo-matched", "grpo-n16", "dapo-n4")
"""Arms that are baselines, not adaptive allocators."""


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def per_seed(runs: list[dict[str, Any]], pool: str, arm: str, key: str, reduce: Any) -> dict[int, float]:
    # a compact run (bench.report.compact_runs) keeps each series' mean only: then the mean stands for `reduce`
    return {
        r["seed"]: float(reduce(r[key])) if key in r else float(r["means"][key])
        for r in runs
        if r["pool"] == pool and r["arm"] == arm
    }


def paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def best_adaptive(alloc: dict[str, Any], dapo_file: dict[str, Any] | None) -> dict[str, Any]:
    runs = alloc["runs"]["main"]
    out = {}
    for pool, data in alloc["by_pool"].items():
        dapo = (dapo_file or {}).get("by_pool", {}).get(pool, {}).get("table", {}).get("dapo-n4")
        out[pool] = pool_goals(pool, data["table"], runs, dapo)
    return out


def pool_goals(pool: str, table: dict[str, Any], runs: list[dict[str, Any]], dapo: dict[str, Any] | None) -> dict:
    arms = [a for a in table if a not in REFERENCE]
    goals: dict[str, Any] = {}

    vs_matched = {a: table[a]["k_tokens_vs_matched"] for a in arms}
    a2 = max(arms, key=lambda a: vs_matched[a]["value"] or 0)
    goals["P2_best"] = {"arm": a2, **{k: vs_matched[a2][k] for k in ("value", "lo", "hi")}}

    by_arm: dict[str, Any] = {}
    if dapo is not None:
        dapo_k = dict(zip(dapo["k_tokens"]["seeds"], dapo["k_tokens"]["per_seed"], strict=True))
        for arm in arms:
            k = table[arm]["k_tokens"]
            mine = dict(zip(k["seeds"], k["per_seed"], strict=True))
            shared = sorted(s for s in set(mine) & set(dapo_k) if mine[s] and dapo_k[s])
            by_arm[arm] = {"seeds": shared, **paired_factor([mine[s] / dapo_k[s] for s in shared])}
        a2b = max(arms, key=lambda a: by_arm[a]["value"] or 0)
        goals["P2b_best"] = {"arm": a2b, **{k: by_arm[a2b][k] for k in ("value", "lo", "hi", "seeds")}}

    share = {a: per_seed(runs, pool, a, "no_signal_share", np.mean) for a in [*arms, "grpo-n4"]}
    p3 = {a: ratio_of_means(*paired(share[a], share["grpo-n4"])) for a in arms}
    a3 = min(arms, key=lambda a: p3[a]["value"])
    goals["P3_best"] = {"arm": a3, **p3[a3]}

    step_s = {a: per_seed(runs, pool, a, "time_step_s", np.median) for a in [*arms, "grpo-n4"]}
    p4 = {a: ratio_of_means(*paired(step_s[a], step_s["grpo-n4"])) for a in arms}
    a4 = min(arms, key=lambda a: p4[a]["value"])
    goals["P4_best"] = {"arm": a4, **p4[a4]}
    goals["all_arms"] = {
        a: {
            "P2_vs_matched": _round(vs_matched[a]["value"]),
            "P3": _round(p3[a]["value"]),
            "P4": _round(p4[a]["value"]),
            **({"P2b_vs_dapo": _round(by_arm[a]["value"])} if by_arm else {}),
        }
        for a in arms
    }
    return goals


GOALS = {
    "P2_best": (">= 1.5", "tokens to target, budget-matched GRPO / best adaptive arm (k on tokens)"),
    "P2b_best": (">= 2.0", "tokens to target, DAPO-n4 / best adaptive arm (k on tokens, paired seeds of two runs)"),
    "P3_best": ("<= 0.20", "no-signal share, best adaptive arm / GRPO-n4 (ratio of seed means)"),
    "P4_best": ("<= 1.3", "wall-clock per step, best adaptive arm / GRPO-n4 (not interleaved; shared machine)"),
}


def summary_entries(goals: dict[str, Any], command: str, source: str) -> dict[str, Any]:
    out = {}
    for key, (goal, what) in GOALS.items():
        if key not in goals.get("default", {}):
            continue
        d, h = goals["default"][key], goals.get("hard", {}).get(key)
        out[key] = {
            "value": d["value"],
            "lo": d["lo"],
            "hi": d["hi"],
            "arm": d["arm"],
            "goal": goal,
            "what": what + "; 90% seed-bootstrap interval; best arm picked after the fact",
            "pool": "default",
            **({"pool_hard": {k: h[k] for k in ("value", "lo", "hi", "arm")}} if h else {}),
            "source": source,
            "command": command,
        }
    return out


def table(goals: dict[str, Any]) -> str:
    """The goals per pool as printed lines, then each arm's figures."""
    lines = [f"{'pool':8s} {'goal':9s} {'arm':14s} {'value':>7s}  interval"]
    for pool, g in goals.items():
        for key in GOALS:
            if key in g:
                r = g[key]
                iv = f"[{r['lo']:.3f}, {r['hi']:.3f}]" if r["lo"] is not None else "n/a"
                lines.append(f"{pool:8s} {key:9s} {r['arm']:14s} {r['value']:7.3f}  {iv}  (goal {GOALS[key][0]})")
        lines.append(f"{'':8s} per arm: " + "; ".join(f"{a} {json.dumps(v)}" for a, v in g["all_arms"].items()))
    return "\n".join(lines)
