"""Does the testbed's ranking of arms hold on the real model? (Where the testbed's ranking disagrees with the real
model's, the study says so.)

For every arm of the real-model study (`run`), its tokens factor against GRPO-n4 on SmolLM2 (`study.analyse`) is set
beside the same factor on each testbed pool: the committed per-seed factors
of the compute-to-target tables (`by_pool[pool].table[arm].k_tokens`, against GRPO-n4, the figures BENCHMARKS quotes)
of the first run and its re-run, pooled (18 seeds per pool), 90% t-interval over per-seed log factors as on both
sides. Per (arm, pool): "intervals overlap" (which at 3 seeds on SmolLM2 may only mean "too wide to tell"), else
"real model higher" / "real model lower". Per pool: the arms' order by point estimate on each side, and the pairs of
arms whose order is *reversed with separate intervals on both sides* (an order that differs only inside the
intervals is not called a disagreement).

Where this departs from a like-for-like comparison, said here so the table is not over-read: on the testbed each arm
ran at its own swept lr on that pool, on the real model every arm runs at GRPO-n4's; the testbed's budget-matched
GRPO is matched to Seq-balanced's samples on the testbed (the real model's to SmolLM2's, n = 21); a testbed seed has
no factor below a shared gain of 1e-4, a SmolLM2 seed below the registered 0.03 (`undefined` counts them on both
sides). The pool whose regime is nearest the study is `small` (prompts that come back; the study's 160 questions are
seen about 3 times). Which mechanism explains a disagreement is written by a person, in BENCHMARKS.md, not inferred.

    python -m studies.llm_convergence.regenerate   # writes it under `testbed` in llm_convergence.json
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "compute_to_target" / "results"
"""The compute-to-target study's committed results (their per-seed tokens factors are what the testbed side reads)."""
POOLS = ("small", "default", "hard", "mixed")
"""`small` first: nearest the study's regime (each question seen several times)."""
RUNS = ("compute_to_target_{pool}.json", "compute_to_target_{pool}_rerun.json")
REFERENCE = "grpo-n4"
AXIS = "tokens"
TABLE_KEY = {"tokens": "k_tokens", "steps": "k_steps"}
"""The compute-to-target table's column of per-seed factors against GRPO-n4, per axis."""


def testbed_factors(
    tables: dict[str, Sequence[dict[str, Any]]], arms: Sequence[str], axis: str = AXIS
) -> dict[str, dict[str, dict[str, Any]]]:
    """{pool: {arm: factor vs GRPO-n4}}: each run's committed per-seed factors of an arm (a table per run file),
    pooled over the runs (`curves.paired_factor`). An arm in no table of a pool is left out of that pool."""
    from reinforce_ada.bench.curves import paired_factor  # deferred: the registered commit's package may run the study

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pool, runs in tables.items():
        out[pool] = {}
        for arm in arms:
            per_seed = [k for t in runs if arm in t for k in t[arm][TABLE_KEY[axis]]["per_seed"]]
            if per_seed:
                out[pool][arm] = _plain(paired_factor(per_seed))
    return out


def _plain(f: dict[str, Any]) -> dict[str, Any]:
    """value, t-interval, seeds with a factor and seeds without one."""
    keep = {k: f.get(k) for k in ("value", "t_lo", "t_hi")}
    per_seed = f.get("per_seed") or []
    keep["seeds"] = sum(k is not None for k in per_seed)
    keep["undefined"] = len(per_seed) - keep["seeds"]
    return keep


def load_testbed(arms: Sequence[str], results_dir: Path | None = None, pools: Sequence[str] = POOLS) -> dict[str, Any]:
    """The testbed's factors for `arms` on every pool whose result JSONs are in `results_dir` (default the
    compute-to-target study's results); a missing file is listed under `missing`, a pool with neither file is left
    out."""
    tables: dict[str, list[dict[str, Any]]] = {}
    missing = []
    for pool in pools:
        for name in RUNS:
            f = Path(results_dir or RESULTS) / name.format(pool=pool)
            if not f.exists():
                missing.append(f.name)
                continue
            table = (json.loads(f.read_text()).get("by_pool") or {}).get(pool, {}).get("table")
            if not isinstance(table, dict):
                raise ValueError(f"{f}: no by_pool[{pool!r}].table (is it a compute-to-target result?)")
            tables.setdefault(pool, []).append(table)
    return {"factors": testbed_factors(tables, arms), "missing": missing}


def reading(real: dict[str, Any], testbed: dict[str, Any]) -> str | None:
    """The reading of one (arm, pool): "intervals overlap" (90%), "real model higher" / "real model lower", or None
    where either side is unread."""
    if real.get("t_lo") is None or testbed.get("t_lo") is None:
        return None
    if real["t_lo"] <= testbed["t_hi"] and testbed["t_lo"] <= real["t_hi"]:
        return "intervals overlap"
    return "real model higher" if real["t_lo"] > testbed["t_hi"] else "real model lower"


def order(factors: dict[str, dict[str, Any]]) -> list[str]:
    """Arm names by point estimate, best first (unread arms left out)."""
    known = {a: f["value"] for a, f in factors.items() if f.get("value") is not None}
    return sorted(known, key=lambda a: -known[a])


def reversed_pairs(testbed: dict[str, dict[str, Any]], real: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Pairs [a, b] that the testbed puts above-below with separate intervals and SmolLM2 below-above, also with
    separate intervals: the only order difference reported as a disagreement."""

    def above(f: dict[str, dict[str, Any]], a: str, b: str) -> bool:
        lo, hi = f[a].get("t_lo"), f[b].get("t_hi")
        return lo is not None and hi is not None and lo > hi

    both = sorted(set(testbed) & set(real))
    return [[a, b] for a in both for b in both if a != b and above(testbed, a, b) and above(real, b, a)]


def compare(analysis: dict[str, Any], testbed: dict[str, Any], axis: str = AXIS) -> dict[str, Any]:
    """Per arm and pool: both factors and the reading; per pool: both orders and the reversed pairs."""
    ref = {"value": 1.0, "t_lo": 1.0, "t_hi": 1.0}  # the reference against itself
    real = {a: _plain(row.get(axis) or {}) for a, row in analysis["table"].items() if a != REFERENCE}
    rows, orders = {}, {}
    for arm, f in real.items():
        per_pool = {p: {**fs[arm], "reading": reading(f, fs[arm])} for p, fs in testbed["factors"].items() if arm in fs}
        rows[arm] = {"real": f, "testbed": per_pool}
    for pool, fs in testbed["factors"].items():
        tb = {REFERENCE: ref, **{a: fs[a] for a in real if a in fs}}
        rl = {REFERENCE: ref, **real}
        orders[pool] = {"testbed": order(tb), "real": order(rl), "reversed": reversed_pairs(tb, rl)}
    return {"axis": axis, "reference": REFERENCE, "rows": rows, "orders": orders, "missing": testbed["missing"]}


def markdown(cmp: dict[str, Any]) -> str:
    """The comparison as a Markdown table (one row per arm, one column per pool)."""

    def show(f: dict[str, Any]) -> str:
        if f.get("value") is None:
            return "—"
        lo, hi = f.get("t_lo"), f.get("t_hi")
        iv = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
        return f"{f['value']:.2f}{iv}"

    pools = list(cmp["orders"])
    head = f"| arm | SmolLM2 ({cmp['axis']} vs {cmp['reference']}) | " + " | ".join(f"testbed `{p}`" for p in pools)
    lines = [head + " |", "|---|---|" + "---|" * len(pools)]
    for arm, row in cmp["rows"].items():
        cells = []
        for p in pools:
            t = row["testbed"].get(p)
            cells.append("—" if t is None else f"{show(t)}: {t['reading'] or 'unread'}")
        lines.append(f"| {arm} | {show(row['real'])} | " + " | ".join(cells) + " |")
    lines.append("")
    for p, o in cmp["orders"].items():
        rev = "; ".join(f"{a} > {b} on the testbed, {b} > {a} on SmolLM2" for a, b in o["reversed"])
        what = f"reversed, intervals apart on both sides: {rev}" if rev else "no pair reversed with intervals apart"
        lines.append(f"- `{p}`: {' > '.join(o['testbed'])}; SmolLM2: {' > '.join(o['real'])} ({what})")
    return "\n".join(lines)
