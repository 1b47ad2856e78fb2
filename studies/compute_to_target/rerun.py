"""The re-run with other seeds of the compute-to-target study: which first run it is read against, the lrs it
inherits, and whether it agrees -- by the registered criterion (`verdict`) and, where the registration carries an
`[amended_agreement]`, by the amended one (`verdict_amended`). Used by `run` and `regenerate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from studies.compute_to_target.agreement import joint_null, noise_quantile, rerun_agreement

RESULTS = Path(__file__).resolve().parent / "results"


def first_run(pool: str, rerun_of: str, results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    """The first run's result JSON holding `pool` (the whole run's, else a tranche's) written under the registration
    `rerun_of` (a path; only its file name is compared): what a re-run is read against; None when there is none."""
    files = [results / "compute_to_target.json", *sorted(results.glob("compute_to_target_*.json"))]
    for f in files:
        if f.exists() and not f.stem.endswith("_rerun"):
            data = json.loads(f.read_text())
            made_under = (data.get("preregistration_file") or {}).get("path", "")
            if Path(made_under).name != Path(rerun_of).name:
                continue
            if pool in data.get("lrs_by_pool", {}) and pool in data.get("by_pool", {}):
                return f, data
    return None


def rerun_fields(pool: str, rerun_of: str, results: Path = RESULTS) -> dict[str, Any]:
    """A re-run's CompareConfig fields: every arm at the lr the first run chose on `pool`, no sweep."""
    found = first_run(pool, rerun_of, results)
    if found is None:
        raise SystemExit(f"no first run of pool {pool!r} under {rerun_of} in {results}: run it before its re-run")
    _, data = found
    return {"fixed_lrs": tuple(sorted(data["lrs_by_pool"][pool].items())), "sweep_each_pool": False, "extend_sweep": 0}


def agreement_with_first(results: dict[str, Any], reg: dict[str, Any], pool: str, base: Path = RESULTS) -> dict:
    """The re-run's `rerun_agreement` with its first run, and the verdict by the criterion its registration fixes:
    every (arm, axis) pair of 90% intervals overlaps, and the claims' arms' (and the first run's oracle's) re-run
    tokens factors fall inside the first run's intervals."""
    path, data = first_run(pool, reg["rerun_of"], base) or (None, None)
    if path is None or data is None:
        raise SystemExit(f"no first run of pool {pool!r} under {reg['rerun_of']}: nothing to agree with")
    first, second = data["by_pool"][pool]["compute"], results["by_pool"][pool]["compute"]
    agree = rerun_agreement(first, second)
    claimed = ({c["arm"] for c in reg.get("claim", []) if c["arm"] != "oracle"} | {first.get("oracle")}) - {None}
    outside = [a for a in sorted(claimed) if not agree["arms"].get(a, {}).get("tokens", {}).get("inside")]
    apart = [f"{a}/{x}" for a, row in agree["arms"].items() for x, c in row.items() if not c["overlap"]]
    why = []
    if apart:
        why.append(f"intervals apart: {', '.join(apart)}")
    if outside:
        why.append(f"claimed arms' tokens factor outside the first interval (or missing): {', '.join(outside)}")
    verdict = {"agrees": not why, "why": "; ".join(why) or "every interval overlaps and the claimed arms fall inside"}
    out = {"first_run": path.name, "rerun_of": reg["rerun_of"], **agree, "verdict": verdict}
    shift = sorted(
        {second.get("oracle"), *[a for a in ("oracle-select", "oracle-alloc") if a in second["table"]]} - {None}
    )
    out["joint_null"] = joint_null(first["table"], second["table"], sorted(claimed), shift)
    if "amended_agreement" in reg:
        out["verdict_amended"] = amended_verdict(agree, reg["amended_agreement"], sorted(claimed), pool)
    return out


def amended_verdict(agree: dict[str, Any], amend: dict[str, Any], claimed: list[str], pool: str) -> dict[str, Any]:
    """The registration's `[amended_agreement]`: the distinct apart cells (arms with identical curves once) are at
    most what seed noise explains at `level` (`agreement.noise_quantile` of the cells' permutation chances), and
    the claimed arms' tokens intervals overlap. Marked pre-registered only for the pools the amendment names."""
    from reinforce_ada.errors import ConfigError

    unknown = sorted(set(amend) - {"written", "pools", "level", "why"})
    level = amend.get("level", 0.95)
    if unknown or not isinstance(amend.get("pools"), list) or not isinstance(level, float) or not 0 < level < 1:
        raise ConfigError(f"[amended_agreement] needs pools = [...] and level in (0, 1); unknown keys {unknown}")
    cells: dict[tuple, tuple[str, float | None, bool]] = {}  # identical arms give identical cells: count them once
    for arm, row in sorted(agree["arms"].items()):
        for axis, c in row.items():
            cells.setdefault(
                (axis, *c["first"], *c["rerun"]), (f"{arm}/{axis}", c.get("p_apart_if_same"), c["overlap"])
            )
    apart = [name for name, _, overlap in cells.values() if not overlap]
    bound = noise_quantile([p for _, p, _ in cells.values() if p is not None], level)
    claims_apart = [a for a in claimed if not agree["arms"].get(a, {}).get("tokens", {}).get("overlap")]
    why = []
    if len(apart) > bound:
        why.append(f"{len(apart)} distinct cells apart ({', '.join(apart)}), more than the {bound} seed noise explains")
    if claims_apart:
        why.append(f"claimed arms' tokens intervals apart (or missing): {', '.join(claims_apart)}")
    return {
        "agrees": not why,
        "why": "; ".join(why)
        or f"{len(apart)} distinct cells apart, within the {bound} seed noise explains at "
        f"{level:.0%}, and the claimed arms' tokens intervals overlap",
        "distinct_cells": len(cells),
        "apart": apart,
        "noise_bound": bound,
        "level": level,
        "preregistered": pool in amend["pools"],
        "written": amend.get("written"),
    }


def rerun_table(pools: list[str], rerun_of: str, results: Path = RESULTS) -> str:
    """BENCHMARKS.md's re-run table: per pool with a re-run, the headline figures of both runs (C0-C3, tokens, with
    90% t-intervals), the cell counts beside what seed noise alone gives, and both verdicts."""
    from reinforce_ada.bench.compute import no_ceiling_gain

    def fig(h: dict[str, Any] | None) -> str:
        if not h or h.get("value") is None:
            return "—"
        ci = f" [{h['t_lo']:.2f}, {h['t_hi']:.2f}]" if h.get("t_lo") is not None else ""
        return f"{h['value']:.2f}{ci}" + (f" ({h['arm']})" if h.get("arm") else "")

    head = "| pool | figure | first run (seeds 0-8) | re-run (seeds 100-108) |\n|---|---|---|---|"
    rows, notes = [head], []
    for pool in pools:
        f = results / f"compute_to_target_{pool}_rerun.json"
        found = first_run(pool, rerun_of, results)
        if not f.exists() or found is None:
            notes.append(f"- `{pool}`: not re-run yet.")
            continue
        second, first = json.loads(f.read_text()), found[1]
        for name in ("C0", "C1", "C2", "C2g", "C3"):
            cells = []
            for run in (first, second):
                h = run["compute"]["by_pool"].get(pool, {})
                no_room = name == "C3" and (h.get(name) or {}).get("value") is not None and no_ceiling_gain(h.get("C0"))
                cells.append(fig(h.get(name)) + (" (C0 holds 1)" if no_room else ""))
            rows.append(f"| {pool} | {name} | {cells[0]} | {cells[1]} |")
        ag = second.get("agreement")
        if not ag:
            notes.append(f"- `{pool}`: re-run written without its agreement (run `--report-only` on it).")
            continue
        n, v, a = ag["counts"], ag["verdict"], ag.get("verdict_amended")
        part = f" (partial: {second['partial']})" if second.get("partial") else ""
        line = (
            f"- `{pool}`{part}: {n['overlap']} of {n['cells']} (arm, axis) interval pairs overlap "
            f"({n.get('expected_apart_if_same')} apart expected from seed noise alone); {n['inside']} re-run "
            f"factors inside the first interval ({n.get('expected_inside_if_same')} expected). "
            f"Registered verdict: **{'agrees' if v['agrees'] else 'does not agree'}** ({v['why']})."
        )
        if a:
            line += (
                f" Amended criterion ({'pre-registered' if a['preregistered'] else 'after the fact'} here): "
                f"**{'agrees' if a['agrees'] else 'does not agree'}** ({a['why']})."
            )
        j = ag.get("joint_null")
        if j:
            shifts = ", ".join(f"{arm} p = {p:.2f}" for arm, p in j["claimed_shift_p"].items())
            line += (
                f" With whole seeds shuffled between the runs (the links between cells kept; not pre-registered): "
                f"{j['apart_mean']} distinct cells apart on average, {j['apart_quantile']} at {j['level']:.0%}, "
                f"P(the registered criterion passes) = {j['p_registered_passes']}; tokens-factor shift, "
                f"permutation: {shifts}."
            )
        notes.append(line)
    return "\n".join(rows) + "\n\n" + "\n".join(notes)
