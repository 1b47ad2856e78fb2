"""The study's places, and its registration read into `reinforce-ada compare` settings (shared by `run`, `record`,
`regenerate`).

A registration (`registrations/preregistration.toml`) names the code that runs, the pools, the paired seeds, the token
budget every arm runs to, the lr grid, the arms as `NAME=SPEC` (each with its own prompts per step after `|`), the
reference family (every uniform arm of the grid: the best of them per pool and axis is the reference) and the claims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studies.protocol.prereg import read_file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"
PREREG = HERE / "registrations" / "preregistration.toml"
RAW = ROOT / "runs" / "fewer_samples" / "records"
"""Where a running study keeps each finished run's full record (scratch; the repository keeps the compact records)."""
INSTRUMENT = ("pools", "seeds", "token_budget", "eval_points", "step_cap", "lrs", "sweep_seeds", "uniform", "arms")


def load(path: str | Path = PREREG) -> dict[str, Any]:
    """The registration, its instrument checked; the error names the file and the key."""
    reg = read_file(Path(path))
    inst = reg.get("instrument") or {}
    missing = [k for k in INSTRUMENT if k not in inst]
    if missing:
        raise SystemExit(f"{path}: [instrument] lacks {missing}")
    names = [a.partition("=")[0].strip() for a in inst["arms"]]
    unknown = sorted(set(inst["uniform"]) - set(names))
    if unknown or "grpo-n4" not in inst["uniform"]:
        raise SystemExit(f"{path}: the uniform family must be arms of the study and hold grpo-n4 ({unknown})")
    for claim in reg.get("claim", []):
        if claim["arm"] not in names:
            raise SystemExit(
                f"{path}: claim {claim['figure']} reads arm {claim['arm']!r}, which the study does not run"
            )
    seeds = sorted(inst["seeds"])
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"{path}: registered seeds must be consecutive (compare numbers them from an offset)")
    return reg


def config_fields(reg: dict[str, Any], pools: list[str]) -> dict[str, Any]:
    """`bench.compare.CompareConfig` fields of the registration (every arm is main, every seed paired)."""
    inst = reg["instrument"]
    seeds = sorted(inst["seeds"])
    return {
        "arms": tuple(inst["arms"]),
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
