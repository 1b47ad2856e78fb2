"""A third seed set for the cells on which a re-run and its first run disagree (issue 22): which run was unusual?

A registration (`benchmarks/preregistration_tiebreak_<pool>.toml`) names the pool, the third set's seeds, the arms
run again and the cells (arm, cost axis, reference arm) to read. Each cell's factor is computed the same way in all
three runs -- paired by seed against the *registered* reference (not each run's best uniform arm, which may differ in
the third set), 90% t-interval over per-seed log factors -- from the runs stored in each result JSON. The registered
rule then says, per cell: the third interval overlaps both runs' ("between": the two bracket it, seed noise), is apart
from exactly one (that run is the unusual one), or from both ("neither": not stable across seed sets). The pooled
factor over all seeds is reported beside it, labelled as read after the re-run's verdict.

Nothing here changes a registered verdict. Used by `python -m benchmarks.compute_to_target --tiebreak TOML`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"version", "code", "pool", "seeds", "arms", "lrs_from", "runs", "result", "cell", "rule"}
AXES = ("steps", "tokens", "cpu_s", "gpu_s")


def load_tiebreak(path: str | Path) -> dict[str, Any]:
    """Read and check a tie-break registration; an error names the key and what would be valid."""
    from reinforce_ada.bench.prereg import read_file  # deferred: the registered commit's package runs the benchmark

    p = Path(path)
    reg = read_file(p)
    unknown, missing = sorted(set(reg) - KEYS), sorted({"pool", "seeds", "arms", "runs", "result", "cell"} - set(reg))
    if unknown or missing:
        raise SystemExit(
            f"tie-break registration {p}: unknown keys {unknown}, missing keys {missing} (valid: {sorted(KEYS)})"
        )
    if not isinstance(reg["runs"], list) or len(reg["runs"]) != 2:
        raise SystemExit(f"tie-break registration {p}: runs must list the first run's and the re-run's result JSONs")
    for i, c in enumerate(reg["cell"]):
        if set(c) != {"arm", "axis", "reference"} or c["axis"] not in AXES:
            raise SystemExit(
                f"tie-break registration {p}: cell {i} must have arm, axis (one of {AXES}), reference; got {c}"
            )
        if c["arm"] not in reg["arms"] or c["reference"] not in reg["arms"]:
            raise SystemExit(f"tie-break registration {p}: cell {i} names an arm not in arms {reg['arms']}: {c}")
    level = reg.get("rule", {}).get("level", 0.9)
    if level != 0.9:
        raise SystemExit(
            f"tie-break registration {p}: [rule] level must be 0.90 (the runs' intervals are 90%), got {level}"
        )
    return {**reg, "_path": str(path)}


def bracket(third: tuple[float, float], first: tuple[float, float], second: tuple[float, float]) -> str:
    """The registered rule on three (lo, hi) intervals: "between", "first" / "second" (the unusual run), "neither"."""

    def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] <= b[1] and b[0] <= a[1]

    o1, o2 = overlap(third, first), overlap(third, second)
    return "between" if o1 and o2 else "first" if o2 else "second" if o1 else "neither"


def _factor(result: dict[str, Any], pool: str, cell: dict[str, str], where: str) -> dict[str, Any]:
    from reinforce_ada.bench.compute import _by_arm, factor

    by_arm = _by_arm([r for r in result["runs"]["main"] if r["pool"] == pool])
    for name in (cell["arm"], cell["reference"]):
        if not by_arm.get(name):
            raise SystemExit(f"{where}: no main runs of arm {name!r} on pool {pool!r}")
    return factor(by_arm[cell["arm"]], by_arm[cell["reference"]], cell["axis"])


def tiebreak(reg: dict[str, Any], root: Path = ROOT) -> dict[str, Any]:
    """Every registered cell's factor in the three runs, the rule's reading and the pooled factor."""
    from reinforce_ada.bench.curves import paired_factor

    paths = [root / reg["runs"][0], root / reg["runs"][1], root / reg["result"]]
    for f in paths:
        if not f.exists():
            raise SystemExit(f"no result {f}: run the registered command first (see the registration's header)")
    runs = [json.loads(f.read_text()) for f in paths]
    cells = []
    for cell in reg["cell"]:
        fs = [_factor(r, reg["pool"], cell, str(f)) for r, f in zip(runs, paths, strict=True)]
        if any(x.get("t_lo") is None for x in fs):
            reading = "undefined (a run without an interval)"
        else:
            first, second, third = ((x["t_lo"], x["t_hi"]) for x in fs)
            reading = bracket(third, first, second)
        pooled = paired_factor([k for x in fs for k in x["per_seed"]])
        cells.append(
            {
                **cell,
                "runs": [{"file": f.name, "seeds": x["seeds"], **_short(x)} for f, x in zip(paths, fs, strict=True)],
                "reading": reading,
                "pooled": {**_short(pooled), "seeds": sum(len(x["seeds"]) for x in fs), "after_the_fact": True},
            }
        )
    return {"registration": reg.get("_path"), "pool": reg["pool"], "seeds": reg["seeds"], "cells": cells}


def write_tiebreak(reg: dict[str, Any], root: Path = ROOT) -> dict[str, Any]:
    """`tiebreak` stored under the key `tiebreak` of the third set's result JSON (atomically), and returned."""
    out = tiebreak(reg, root)
    path = root / reg["result"]
    data = json.loads(path.read_text())
    data["tiebreak"] = out
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return out


def _short(f: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(f[k], 4) if isinstance(f.get(k), float) else f.get(k)) for k in ("value", "t_lo", "t_hi")}


def tiebreak_table(out: dict[str, Any]) -> str:
    """Markdown: per cell, the three runs' factors with 90% t-intervals, the rule's reading, the pooled factor."""

    def fig(x: dict[str, Any]) -> str:
        return "—" if x.get("value") is None else f"{x['value']:.2f} [{x['t_lo']:.2f}, {x['t_hi']:.2f}]"

    meaning = {"between": "between: seed noise", "first": "the first run is unusual",
               "second": "the re-run is unusual", "neither": "not stable across seed sets"}  # fmt: skip
    rows = [
        "| cell (arm / axis vs reference) | first run | re-run | third set | reading (registered rule) "
        "| pooled, all seeds (after the fact) |",
        "|---|---|---|---|---|---|",
    ]
    for c in out["cells"]:
        a, b, t = (fig(r) for r in c["runs"])
        rows.append(
            f"| {c['arm']} / {c['axis']} vs {c['reference']} | {a} | {b} | {t} | "
            f"{meaning.get(c['reading'], c['reading'])} | {fig(c['pooled'])} ({c['pooled']['seeds']} seeds) |"
        )
    return "\n".join(rows)
