"""Does the testbed's ranking of arms hold on the real model? (issue 24: "where the testbed's ranking disagrees with
the real model's, say so").

For every arm of the real-model study (`benchmarks/llm_convergence.py`), its tokens factor against GRPO-n4 on
SmolLM2 (`bench.llm_study.analyse`) is set beside the same factor on each testbed pool, read from the committed
compute-to-target results: the first run and its re-run pooled (18 seeds per pool, each seed paired with GRPO-n4 inside
its own run), 90% t-interval over per-seed log factors as on both sides. Per (arm, pool): "agrees" where the two
intervals overlap, else "real model higher" / "real model lower"; and the arms' order by factor on each side.

Where this departs from a like-for-like comparison, said here so the table is not over-read: on the testbed each arm
ran at its own swept lr on that pool, on the real model every arm runs at GRPO-n4's; the testbed's budget-matched
GRPO is matched to Seq-balanced's samples on the testbed (the real model's to SmolLM2's, n = 21). The pool whose
regime is nearest the study is `small` (prompts that come back; the study's 160 questions are seen about 3 times).
Which mechanism explains a disagreement is written by a person, in BENCHMARKS.md, not inferred here.

    python -m benchmarks.llm_convergence --report-only   # writes it under `testbed` in llm_convergence.json
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
POOLS = ("small", "default", "hard", "mixed")
"""`small` first: nearest the study's regime (each question seen several times)."""
RUNS = ("compute_to_target_{pool}.json", "compute_to_target_{pool}_rerun.json")
REFERENCE = "grpo-n4"
AXIS = "tokens"


def testbed_factors(
    results: dict[str, Sequence[dict[str, Any]]], arms: Sequence[str], axis: str = AXIS
) -> dict[str, dict[str, dict[str, Any]]]:
    """{pool: {arm: factor vs GRPO-n4}} from each pool's main-phase run records (any number of runs pooled: a seed
    is keyed by (run index, seed) so that equal seed numbers of two runs never pair across runs)."""
    from reinforce_ada.bench.compute import factor  # deferred: the registered commit's package may run the study

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pool, records in results.items():
        by_arm: dict[str, dict[Any, dict[str, Any]]] = {}
        for r in records:
            by_arm.setdefault(r["arm"], {})[(r["_run"], r["seed"])] = r
        if REFERENCE not in by_arm:
            raise ValueError(f"testbed pool {pool!r}: no {REFERENCE} runs to read factors against")
        out[pool] = {a: _plain(factor(by_arm[a], by_arm[REFERENCE], axis)) for a in arms if a in by_arm}
    return out


def _plain(f: dict[str, Any]) -> dict[str, Any]:
    keep = {k: f.get(k) for k in ("value", "t_lo", "t_hi")}
    keep["seeds"] = len(f.get("seeds", []))
    return keep


def load_testbed(arms: Sequence[str], results_dir: Path | None = None, pools: Sequence[str] = POOLS) -> dict[str, Any]:
    """The testbed's factors for `arms` on every pool whose result JSONs are in `results_dir` (default
    benchmarks/results); a missing file is listed under `missing`, a pool with neither file is left out."""
    records: dict[str, list[dict[str, Any]]] = {}
    missing = []
    for pool in pools:
        for i, name in enumerate(RUNS):
            f = Path(results_dir or RESULTS) / name.format(pool=pool)
            if not f.exists():
                missing.append(f.name)
                continue
            runs = json.loads(f.read_text())["runs"]["main"]
            records.setdefault(pool, []).extend({**r, "_run": i} for r in runs if r["pool"] == pool)
    return {"factors": testbed_factors(records, arms), "missing": missing}


def reading(real: dict[str, Any], testbed: dict[str, Any]) -> str | None:
    """The reading of one (arm, pool): "agrees" (the 90% intervals overlap), "real model higher" / "real model
    lower", or None where either side is unread."""
    if real.get("t_lo") is None or testbed.get("t_lo") is None:
        return None
    if real["t_lo"] <= testbed["t_hi"] and testbed["t_lo"] <= real["t_hi"]:
        return "agrees"
    return "real model higher" if real["t_lo"] > testbed["t_hi"] else "real model lower"


def order(factors: dict[str, float | None]) -> list[str]:
    """Arm names by factor, best first (GRPO-n4 at 1.0; unread arms left out)."""
    known = {a: v for a, v in factors.items() if v is not None}
    return sorted(known, key=lambda a: -known[a])


def compare(analysis: dict[str, Any], testbed: dict[str, Any], axis: str = AXIS) -> dict[str, Any]:
    """Per arm and pool: both factors and the reading; per pool: the two orders and whether they are the same."""
    table = analysis["table"]
    real = {a: _plain(row.get(axis) or {}) for a, row in table.items() if a != REFERENCE}
    rows, orders = {}, {}
    real_order = order({REFERENCE: 1.0, **{a: f["value"] for a, f in real.items()}})
    for arm, f in real.items():
        per_pool = {}
        for pool, fs in testbed["factors"].items():
            if arm in fs:
                per_pool[pool] = {**fs[arm], "reading": reading(f, fs[arm])}
        rows[arm] = {"real": f, "testbed": per_pool}
    for pool, fs in testbed["factors"].items():
        tb = order({REFERENCE: 1.0, **{a: fs[a]["value"] for a in real if a in fs}})
        both = set(tb) & set(real_order)
        same = [a for a in tb if a in both] == [a for a in real_order if a in both]
        orders[pool] = {"testbed": tb, "real": real_order, "same": same}
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
        same = "the same order" if o["same"] else "a different order"
        lines.append(f"- `{p}`: {' > '.join(o['testbed'])}; SmolLM2: {' > '.join(o['real'])} ({same})")
    return "\n".join(lines)
