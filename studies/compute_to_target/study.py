"""The compute-to-target study's places and registration rules, shared by `run` and `regenerate`.

Each registration (`registrations/preregistration*.toml`) writes its own result files under `results/`: the first
registration `compute_to_target_<pools>`, another `compute_to_target_<pools>_<tag>` (`registration_tag`), and its
summary figures as `C1[tag]`. Every result is regenerated from `results/records.jsonl.gz` (`regenerate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"
REGISTRATIONS = HERE / "registrations"
PREREG = REGISTRATIONS / "preregistration.toml"
RAW = ROOT / "runs" / "compute" / "records"
"""Where a running study keeps each finished run's full record (scratch: carry it along to resume on another
machine; the repository keeps the compact records only)."""


def registration_path(path: str) -> Path:
    """A registration named by an older path (`benchmarks/preregistration_X.toml`): the file of that name here."""
    return REGISTRATIONS / Path(path).name


def config_fields(reg: dict[str, Any], pools: list[str]) -> dict[str, Any]:
    inst = reg["instrument"]
    seeds = sorted(inst["seeds"])
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"registered seeds must be consecutive (compare numbers them from an offset): {seeds}")
    return {
        "arms": tuple(inst.get("arms", ())),
        "pools": tuple(pools),
        "steps": inst["steps"],
        "ref_steps_factor": inst.get("ref_steps_factor", 2.0),
        "batch_size": inst.get("batch_size", 16),
        "lrs": tuple(inst.get("lrs", (1e-4, 2e-4, 4e-4))),
        "sweep_seeds": inst.get("sweep_seeds", 3),
        "sweep_each_pool": True,
        "extend_sweep": inst.get("extend_sweep", 2),
        "seeds": len(seeds),
        "other_seeds": len(seeds),
        "seed_offset": seeds[0],
        "eval_every": inst.get("eval_every", 10),
        "uniform": tuple(inst["uniform"]),
        "oracles": tuple(inst["oracles"]),
        "long_arms": tuple(inst["uniform"]),
    }


def registration_tag(path: str | Path) -> str:
    """ "" for the study's first registration; else the file's stem without `preregistration_` (`rerun`, `iw`):
    the suffix of that registration's result files and of its summary.json figures (`C1[iw]`)."""
    if Path(path).resolve() == PREREG.resolve():
        return ""
    return Path(path).stem.removeprefix("preregistration_").removeprefix("preregistration") or "other"


def partial(results: dict[str, Any], reg: dict[str, Any], pools: list[str], registered: list[str]) -> str | None:
    """None when every registered arm has every registered seed on every registered pool; else what is missing."""
    want = set(reg["instrument"]["seeds"])
    missing = [f"pools {sorted(set(registered) - set(pools))} not in this run"] if pools != registered else []
    for pool in pools:
        table = results["by_pool"].get(pool, {}).get("compute", {}).get("table", {})
        for arm in reg["instrument"].get("arms", []):
            have = set(table.get(arm, {}).get("seeds", []))
            if want - have:
                missing.append(f"{pool}/{arm}: {len(have & want)} of {len(want)} seeds")
    return "; ".join(missing) if missing else None
