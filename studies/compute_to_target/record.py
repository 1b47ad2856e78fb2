"""One registered run of the compute-to-target study: run its jobs (`--here`, the registered package), or record
them (this checkout's package reads their records) into results/records.jsonl.gz and write the result from there.
Used by `run`."""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

from studies.compute_to_target.rerun import rerun_fields
from studies.compute_to_target.study import RAW, RECORDS, RESULTS, config_fields, registration_tag

SKELETON = {
    "top": [
        "config",
        "date",
        "machine",
        "arms",
        "code_fingerprint",
        "git_commit",
        "skipped_arms",
        "testbed",
        "pools",
        "lr_sweep",
        "lrs",
        "lrs_by_pool",
        "runs",
        "by_pool",
        "missing",
        "compute",
        "goals",
        "seconds",
        "partial",
        "preregistration_file",
        "command",
    ],
    "lr_sweep": ["pool", "pools", "seeds", "arms", "by_pool", "fixed"],
    "by_pool": ["start_accuracy", "reference_gain", "target_levels", "table", "goals", "compute"],
}
"""The keys a result of this study is written with (`protocol.compare_results.shape`)."""


def record(
    args: argparse.Namespace,
    argv: list[str],
    reg: dict[str, Any],
    pools: list[str],
    registered: list[str],
    rerun: bool,
    frozen: Path | None,
) -> int:
    from reinforce_ada.bench.compare import CompareConfig, run_compare
    from studies.protocol.prereg import provenance

    name = out_name(args, pools, registered)
    fields = settings(args, reg, pools, rerun)
    if not args.report_only:  # the registered code (run with --here from its worktree) runs the jobs; nothing else
        run_compare(CompareConfig(**fields, out=str(RAW.parent / name)))
        return 0
    package = str(frozen / "src" / "reinforce_ada") if frozen else None
    c = CompareConfig(**fields, only_cached=True, fingerprint_of=package, out=str(RESULTS / name))
    carrier = None
    if "carry" in reg:
        from studies.protocol.carry import Carrier

        carrier = Carrier(carry_of(reg), RAW)
    if args.carry_pass:
        return finish_carry_pass(c, carrier, args.carry_pass)
    results = run_compare(c, carry=carrier) if carrier is not None else run_compare(c)
    meta = {
        k: results[k]
        for k in SKELETON["top"]
        if k in results
        and k not in ("lr_sweep", "lrs", "lrs_by_pool", "runs", "by_pool", "missing", "compute", "goals")
    }
    meta["config"] = {**dataclasses.asdict(c), "preregistration": str(Path(args.prereg).resolve())}
    meta["registration"] = {**provenance(args.prereg), "content": reg}
    meta["preregistration_file"] = provenance(args.prereg)
    meta["command"] = "python -m studies.compute_to_target.run " + " ".join(argv)
    sk = json.loads(json.dumps(SKELETON))
    if carrier is not None:
        meta["carried"] = carrier.summary()
        sk["top"].insert(sk["top"].index("preregistration_file"), "carried")
        bad = {k: v for k, v in meta["carried"]["verdicts"].items() if v != "same"}
        if bad:
            print(f"WARNING: carried records not confirmed by their same-seed check: {bad}", flush=True)
    if rerun:
        sk["top"].insert(sk["top"].index("command"), "agreement")
    ids, carried = _record_ids(results)
    if carrier is not None:
        print(f"carry: removed {carrier.clear()} carried copies (derived: the next run or report makes them again)")
    from studies.protocol import records

    runs = [records.compact(r, c.steps, ids[id(r)]) for rs in results["runs"].values() for r in rs]
    ctx: dict[str, Any] = {"name": name, "meta": _plain(meta), "skeleton": sk}
    ctx["runs"] = {phase: [ids[id(r)] for r in rs] for phase, rs in results["runs"].items()}
    if carried:
        ctx["carried_from"] = carried
    old = records.read(RECORDS)[1] if RECORDS.exists() else {}
    if not args.no_summary and not rerun:
        tag = registration_tag(args.prereg)
        order = 1 + max((x.get("summary", {}).get("order", 0) for x in old.values()), default=0)
        ctx["summary"] = {"tag": tag, "command": meta["command"], "date": meta["date"], "order": order}
    records.update(RECORDS, ctx, runs)
    from studies.compute_to_target import regenerate

    regenerate.refresh(name, summary=not args.no_summary and not rerun)
    return 0


def _record_ids(results: dict[str, Any]) -> tuple[dict[int, str], dict[str, str]]:
    """Each run's id, the name of its record file in RAW (a carried run: the record it was carried from, found by
    key, pool and total seconds), and the carried runs' marks by id."""
    index: dict[tuple, str] = {}
    for f in RAW.glob("*.json.gz"):
        with gzip.open(f, "rt") as fh:
            r = json.load(fh)
        if not r.get("carried_from"):  # a carried copy: its original is in the folder too
            index[(r["key"], r["pool"], r["seconds"]["total"])] = f.name[:24]
    out, carried = {}, {}
    for rs in results["runs"].values():
        for r in rs:
            out[id(r)] = index[(r["key"], r["pool"], r["seconds"]["total"])]
            if r.get("carried_from"):
                carried[out[id(r)]] = r["carried_from"]
    return out, carried


def _plain(x: Any) -> Any:
    from reinforce_ada.bench.report import _jsonable, _rounded

    return json.loads(json.dumps(_rounded(x), default=_jsonable))


def out_name(args: argparse.Namespace, pools: list[str], registered: list[str]) -> str:
    tag = registration_tag(args.prereg)
    whole = pools == registered and not tag
    name = "compute_to_target" if whole else "compute_to_target_" + "_".join(pools)
    return f"{name}_{tag}" if tag else name


def settings(args: argparse.Namespace, reg: dict[str, Any], pools: list[str], rerun: bool) -> dict[str, Any]:
    """CompareConfig fields of a registered run (the registered code's CompareConfig may lack newer fields: only
    these are passed to it)."""
    return {
        **config_fields(reg, pools),
        **(rerun_fields(pools[0], reg["rerun_of"]) if rerun else {}),
        "workers": args.workers,
        "compute_arm": next((cl["arm"] for cl in reg["claim"] if cl["figure"] == "C1"), "mopps"),
        "records": str(RAW),
        "run_root": "runs/compute",
    }


def carry_of(reg: dict[str, Any]) -> Any:
    """The registration's `[carry]` as a `protocol.carry.Carry` (the other commit from a frozen worktree)."""
    from studies.protocol.carry import Carry
    from studies.protocol.worktree import frozen_checkout

    t = reg["carry"]
    return Carry(str(frozen_checkout(t["from"]) / "src" / "reinforce_ada"), tuple(t["arms"]), tuple(t["check_seeds"]))


def finish_carry_pass(c: Any, carrier: Any, mode: str) -> int:
    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.errors import ConfigError

    try:
        run_compare(c, log=lambda m: None, carry=carrier)
    except ConfigError:  # nothing to report yet: the carrying is done all the same
        pass
    if mode == "prepare":
        print(
            f"carry: {carrier.copied} records carried from {carrier.fingerprint[:12]}; "
            f"{len(carrier.checks)} same-seed checks left for the registered code to run",
            flush=True,
        )
        return 0
    removed = 0
    for (pool, arm), verdict in sorted(carrier.verdicts(carrier.verify()).items()):
        if verdict != "same":
            n = carrier.uncarry(pool, arm)
            removed += 1
            print(f"carry: {pool}/{arm} check {verdict}: removed its {n} carried records", flush=True)
        else:
            print(f"carry: {pool}/{arm} check same: its carried records stand", flush=True)
    return removed
