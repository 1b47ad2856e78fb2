"""A third seed set for the cells on which a re-run and its first run disagree: which run was unusual?

A registration (`registrations/preregistration_tiebreak_<pool>.toml`) names the pool, the third set's seeds, the arms
run again and the cells (arm, cost axis, reference arm) to read. Each cell's factor is computed the same way in all
three runs -- paired by seed against the *registered* reference (not each run's best uniform arm, which may differ in
the third set), 90% t-interval over per-seed log factors -- from each result's runs in the records file, at the 4
significant digits the result JSONs stored them with when the reading was registered (`regenerate`). The registered
rule then says, per cell: the third interval overlaps both runs' ("between": the two bracket it, seed noise), is apart
from exactly one (that run is the unusual one), or from both ("neither": not stable across seed sets). The pooled
factor over all seeds is reported beside it, labelled as read after the re-run's verdict.

Nothing here changes a registered verdict. Read by `regenerate` into the third set's result JSON (`tiebreak`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

KEYS = {"version", "code", "pool", "seeds", "arms", "lrs_from", "runs", "result", "cell", "rule"}
AXES = ("steps", "tokens", "cpu_s", "gpu_s")


def load_tiebreak(path: str | Path) -> dict[str, Any]:
    """Read and check a tie-break registration; an error names the key and what would be valid."""
    from studies.protocol.prereg import read_file

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


def tiebreak(reg: dict[str, Any], runs: list[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """Every registered cell's factor in the three runs, the rule's reading and the pooled factor. `runs`: (result
    file name, result with its main runs, or None where there is none yet) of the first run, the re-run and the third
    set, in that order."""
    from reinforce_ada.bench.curves import paired_factor

    for name, r in runs:
        if r is None:
            raise SystemExit(f"no result {name}: run the registered command first (see the registration's header)")
    cells = []
    for cell in reg["cell"]:
        fs = [_factor(r, reg["pool"], cell, name) for name, r in runs]
        if any(x.get("t_lo") is None for x in fs):
            reading = "undefined (a run without an interval)"
        else:
            first, second, third = ((x["t_lo"], x["t_hi"]) for x in fs)
            reading = bracket(third, first, second)
        pooled = paired_factor([k for x in fs for k in x["per_seed"]])
        cells.append(
            {
                **cell,
                "runs": [
                    {"file": name, "seeds": x["seeds"], **_short(x)} for (name, _), x in zip(runs, fs, strict=True)
                ],
                "reading": reading,
                "pooled": {**_short(pooled), "seeds": sum(len(x["seeds"]) for x in fs), "after_the_fact": True},
            }
        )
    return {"registration": reg.get("_path"), "pool": reg["pool"], "seeds": reg["seeds"], "cells": cells}


def result_names(reg: dict[str, Any]) -> list[str]:
    """The three results a tie-break reads (first run, re-run, third set), by name (the registration names their
    files by path; only the file name counts)."""
    return [Path(f).stem for f in (*reg["runs"], reg["result"])]


def _short(f: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(f[k], 4) if isinstance(f.get(k), float) else f.get(k)) for k in ("value", "t_lo", "t_hi")}


def tiebreak_table(out: dict[str, Any]) -> str:
    """Markdown: per cell, the three runs' factors with 90% t-intervals, the rule's reading, the pooled factor."""

    def fig(x: dict[str, Any]) -> str:
        return "—" if x.get("value") is None else f"{x['value']:.2f} [{x['t_lo']:.2f}, {x['t_hi']:.2f}]"

    meaning = {
        "between": "between: seed noise",
        "first": "the first run is unusual",
        "second": "the re-run is unusual",
        "neither": "not stable across seed sets",
    }
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
