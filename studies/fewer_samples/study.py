"""The study's places, and its registration read into `reinforce-ada compare` settings (shared by `run`, `record`,
`regenerate`).

A registration (`registrations/preregistration.toml`) names the code that runs, the pools, the paired seeds, the token
budget every arm runs to, the lr grid, the arms as `NAME=SPEC` (each with its own prompts per step after `|`), the
reference family (every uniform arm of the grid: the best of them per pool and axis is the reference) and the claims.
A claim with `twin = SUFFIX` and no `arm` reads the best uniform arm's twin (the uniform arm named with SUFFIX)
against it (`analysis.twins`).
A dated `[[amendment]]` table (`date`, `why`, `stop`: arm names; optionally `base`, each stopped arm's registered arm
that its runs are compared with, a twin's being its base arm) stops arms after runs began (`stopped`): they are no
longer planned or run, their recorded runs stay in the records file apart from the result's (`protocol.resume`), and a
claim that reads only stopped arms is reported as stopped with the amendment's reason. A uniform arm cannot be stopped
(it is the reference), nor part of a twin family (a twin claim reads the best uniform arm's twin, whichever it is).
A later registration (`registrations/confirmation.toml`) carries a `name` of its own: its records and result live in
`results/<name>/`, its scratch in `runs/fewer_samples/<name>/`, and its pools may be specs of their own
(`NAME=arithmetic:...`, `bench.testbed.parse_pool`), read by their names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from reinforce_ada.bench.compute import LENGTH_AXES
from reinforce_ada.bench.testbed import parse_pool
from reinforce_ada.errors import ConfigError
from studies.protocol.prereg import read_file
from studies.protocol.resume import Places

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"
PREREG = HERE / "registrations" / "preregistration.toml"
RAW = ROOT / "runs" / "fewer_samples" / "records"
"""Where a running study keeps each finished run's full record (scratch; the repository keeps the compact records)."""
NAME = "fewer_samples"
"""The first registration's name (it carries none): its records and result are `results/` itself."""
AXES = ("tokens", "cpu_s", "gpu_s", *LENGTH_AXES)
"""The compute-to-target axes a claim's goal may read (`bench.compute`); the length axes where the registration's
instrument names them (`length_axes`: answers whose length varies)."""
INSTRUMENT = ("pools", "seeds", "token_budget", "eval_points", "step_cap", "lrs", "sweep_seeds", "uniform", "arms")


def load(path: str | Path = PREREG) -> dict[str, Any]:
    """The registration, its instrument checked; the error names the file and the key."""
    reg = read_file(Path(path))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name_of(reg)):
        raise SystemExit(f"{path}: name = {reg.get('name')!r}; write letters, digits, '_', '.' or '-' (a folder name)")
    inst = reg.get("instrument") or {}
    missing = [k for k in INSTRUMENT if k not in inst]
    if missing:
        raise SystemExit(f"{path}: [instrument] lacks {missing}")
    names = [a.partition("=")[0].strip() for a in inst["arms"]]
    unknown = sorted(set(inst["uniform"]) - set(names))
    if unknown or "grpo-n4" not in inst["uniform"]:
        raise SystemExit(f"{path}: the uniform family must be arms of the study and hold grpo-n4 ({unknown})")
    try:
        pools = [parse_pool(p).name for p in inst["pools"]]
    except ConfigError as e:
        raise SystemExit(f"{path}: [instrument] pools: {e}") from None
    if len(set(pools)) != len(pools):
        raise SystemExit(f"{path}: [instrument] pools repeat a name: {pools}")
    length_axes = inst.get("length_axes", [])
    if not isinstance(length_axes, list) or not set(length_axes) <= set(LENGTH_AXES):
        raise SystemExit(f"{path}: [instrument] length_axes = {length_axes!r}; list some of {list(LENGTH_AXES)}")
    for claim in reg.get("claim", []):
        if claim.get("axis") in set(LENGTH_AXES) - set(length_axes):
            raise SystemExit(
                f"{path}: claim {claim['figure']} reads axis {claim['axis']!r}: name it in [instrument] length_axes"
            )
        if "twin" in claim:  # the best uniform arm's twin (`analysis.twins`): every uniform arm needs one
            missing = [u + str(claim["twin"]) for u in inst["uniform"] if u + str(claim["twin"]) not in names]
            if missing or "arm" in claim or "axis" not in claim:
                raise SystemExit(
                    f"{path}: claim {claim['figure']} (twin = {claim['twin']!r}) needs an axis, no arm, and a twin of "
                    f"every uniform arm; missing: {missing}"
                )
        elif claim.get("arm") not in names:
            raise SystemExit(
                f"{path}: claim {claim['figure']} reads arm {claim.get('arm')!r}, which the study does not run"
            )
        check_goal(path, claim, pools)
    check_amendments(path, reg, names)
    seeds = sorted(inst["seeds"])
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"{path}: registered seeds must be consecutive (compare numbers them from an offset)")
    return reg


def config_fields(reg: dict[str, Any], pools: list[str]) -> dict[str, Any]:
    """`bench.compare.CompareConfig` fields of the registration (every arm is main, every seed paired)."""
    inst = reg["instrument"]
    seeds = sorted(inst["seeds"])
    gone = stopped(reg)
    return {
        "arms": tuple(a for a in inst["arms"] if a.partition("=")[0].strip() not in gone),
        "pools": tuple(pools),
        "steps": inst["step_cap"],
        "token_budget": inst["token_budget"],
        "eval_points": inst["eval_points"],
        "lrs": tuple(inst["lrs"]),
        "sweep_seeds": inst["sweep_seeds"],
        "sweep_each_pool": True,
        "extend_sweep": inst.get("extend_sweep", 0),
        "seeds": len(seeds),
        "other_seeds": len(seeds),
        "seed_offset": seeds[0],
        "uniform": tuple(inst["uniform"]),
        "oracles": (),
        "long_arms": (),
        "value_errors": True,
        "compute_arm": next((c["arm"] for c in reg.get("claim", []) if c["figure"] == "C1"), "spo-64"),
    }


def check_amendments(path: str | Path, reg: dict[str, Any], names: list[str]) -> None:
    """Each `[[amendment]]` names a `date` (YYYY-MM-DD), a `why` and the registered arms it `stop`s (module
    docstring); the error names the amendment and what would be valid."""
    amendments = reg.get("amendment", [])
    if not isinstance(amendments, list) or not all(isinstance(a, dict) for a in amendments):
        raise SystemExit(f"{path}: amendment must be [[amendment]] tables (date, why, stop)")
    inst = reg["instrument"]
    for k, a in enumerate(amendments, 1):
        where = f"{path}: amendment {k}"
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(a.get("date", ""))):
            raise SystemExit(f"{where}: date = {a.get('date')!r}; write the day it was made, YYYY-MM-DD")
        if not isinstance(a.get("why"), str) or not a["why"].strip():
            raise SystemExit(f"{where}: why = {a.get('why')!r}; say what was seen and why the arms stop")
        stop = a.get("stop")
        if not isinstance(stop, list) or not stop or not all(isinstance(s, str) for s in stop):
            raise SystemExit(f"{where}: stop = {stop!r}; list the arm names it stops")
        unknown = [s for s in stop if s not in names]
        if unknown:
            raise SystemExit(f"{where}: stop names arms the study does not run: {unknown}")
        reference = [s for s in stop if s in inst["uniform"]]
        if reference:
            raise SystemExit(f"{where}: {reference} are uniform arms (the reference); register a new study instead")
        base = a.get("base", {})
        if not isinstance(base, dict) or not set(base) <= set(stop) or not set(base.values()) <= set(names) - set(stop):
            raise SystemExit(
                f'{where}: base = {base!r}; map a stopped arm to the registered arm it repeats, e.g. {{ a-2 = "a" }}'
            )
    gone = set(stopped(reg))
    for claim in reg.get("claim", []):
        twins = {u + str(claim["twin"]) for u in inst["uniform"]} if "twin" in claim else set()
        if gone & twins and not twins <= gone:
            raise SystemExit(
                f"{path}: claim {claim['figure']} reads the best uniform arm's twin: stop all of {sorted(twins)} or "
                f"none (stopped: {sorted(gone & twins)})"
            )


def stopped(reg: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The arms that dated amendments stopped, each with its amendment's `date` and `why` (the first that names it)."""
    out: dict[str, dict[str, str]] = {}
    for a in reg.get("amendment", []):
        for arm in a["stop"]:
            out.setdefault(arm, {"date": str(a["date"]), "why": a["why"]})
    return out


def claim_stopped(reg: dict[str, Any], claim: dict[str, Any]) -> dict[str, str] | None:
    """The amendment that stopped every arm `claim` reads (its `arm`, or every twin of its `twin`), else None."""
    gone = stopped(reg)
    if not gone:
        return None
    if "twin" in claim:
        arms = [u + str(claim["twin"]) for u in reg["instrument"]["uniform"]]
    else:
        arms = [claim.get("arm")]
    return gone[arms[0]] if arms and all(a in gone for a in arms) else None


def live_arms(reg: dict[str, Any]) -> list[str]:
    """The registered arms' names that no amendment stopped, in order."""
    gone = stopped(reg)
    names = (a.partition("=")[0].strip() for a in reg["instrument"]["arms"])
    return [a for a in names if a not in gone]


def check_goal(path: str | Path, claim: dict[str, Any], pools: list[str]) -> None:
    """A claim read off a compute-to-target axis names it (`axis`, one of `AXES`); its goal, when it has one, is
    `at_least` (a factor), with `lower_end_above` (the interval's lower end must pass it), `at_least_on` (a higher bar
    on named pools) and `pools` (the registered pools it applies to; default all) optional (`analysis.Goal`)."""
    keys = {"axis", "at_least", "lower_end_above", "at_least_on", "pools"} & set(claim)
    if not keys:
        return
    fig = claim.get("figure")
    if claim.get("axis") not in AXES:
        raise SystemExit(f"{path}: claim {fig}: axis = {claim.get('axis')!r}; use one of {list(AXES)}")
    if not isinstance(claim.get("at_least_on", {}), dict):
        raise SystemExit(f"{path}: claim {fig}: at_least_on = {claim['at_least_on']!r}; write a table {{ pool = bar }}")
    if "pools" in claim and (not isinstance(claim["pools"], list) or not claim["pools"]):
        raise SystemExit(
            f"{path}: claim {fig}: pools = {claim['pools']!r}; list the pools it applies to (or leave it out)"
        )
    bars = {k: claim[k] for k in ("at_least", "lower_end_above") if k in claim}
    bars |= {f"at_least_on.{p}": v for p, v in (claim.get("at_least_on") or {}).items()}
    for key, v in bars.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise SystemExit(f"{path}: claim {fig}: {key} = {v!r}; write a number (a factor, e.g. 1.0)")
    if "at_least" not in claim and len(bars):
        raise SystemExit(f"{path}: claim {fig}: a goal's bars need at_least (the factor every pool must reach)")
    unknown = (set(claim.get("pools") or []) | set(claim.get("at_least_on") or {})) - set(pools)
    if unknown:
        raise SystemExit(f"{path}: claim {fig} names pools {sorted(unknown)}; registered: {pools}")


def name_of(reg: dict[str, Any]) -> str:
    """The registration's name: its results' folder and file name."""
    return str(reg.get("name") or NAME)


def pool_names(reg: dict[str, Any]) -> list[str]:
    """The registered pools' names, in order (a spec `NAME=SOURCE:...` is read by its name)."""
    return [parse_pool(p).name for p in reg["instrument"]["pools"]]


def places(reg: dict[str, Any]) -> Places:
    """Where the registration's state lives: the first registration's in `results/`, a later one's in
    `results/<name>/` (its scratch in `runs/fewer_samples/<name>/`)."""
    name = name_of(reg)
    if name == NAME:
        return Places(RECORDS, RAW, RESULTS, RAW.parent)
    home, scratch = RESULTS / name, RAW.parent / name
    return Places(home / "records.jsonl.gz", scratch / "records", home, scratch)


def later_registrations(results: Path = RESULTS) -> list[str]:
    """The names of the later registrations with recorded runs (`results/<name>/records.jsonl.gz`)."""
    return sorted(p.parent.name for p in results.glob("*/records.jsonl.gz"))
