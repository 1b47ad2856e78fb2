"""Fewer samples, more prompts: SPO against the grid of uniform GRPO (n x prompts per step), every arm to the same
token budget, pre-registered (registrations/preregistration.toml).

    nice -n 10 python -m studies.fewer_samples.run --workers 2          # every registered pool (CPU-hours:
                                                                        # resumable, see below)
    nice -n 10 python -m studies.fewer_samples.run --workers 2 --pools hard   # one pool
    python -m studies.fewer_samples.run --report-only                   # record and write the runs finished so far
    python -m studies.fewer_samples.run --quick                         # a few minutes, scratch (runs/fewer-quick)
    python -m studies.fewer_samples.regenerate                          # the committed result from the records

1) The registered commit's package runs the jobs, from a detached worktree (`protocol.worktree`), so the runs keep
   their code while the library moves on; this checkout records them and writes the result.
2) Resumable: every finished run's full record is kept under runs/fewer_samples/records (scratch: carry that folder
   to continue elsewhere); a stopped study runs only what is missing. Jobs go seed by seed across arms.
3) The report pass (`--report-only`, also after the runs) reads those records with this checkout's package, compacts
   them into results/records.jsonl.gz with the result's context, and writes results/fewer_samples.{json,png}
   (`regenerate`); a result missing seeds or pools says so in `partial`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import json
import sys
from typing import Any

from studies.fewer_samples.study import PREREG, RAW, RECORDS, config_fields, load

NAME = "fewer_samples"
QUICK = {"pool_size": 256, "seeds": 1, "other_seeds": 1, "sweep_seeds": 1, "token_budget": 12000, "eval_points": 4}
QUICK_ARMS = ("grpo-n2x32", "grpo-n4", "spo-64", "spo-64-prior")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m studies.fewer_samples.run", description=__doc__.split("\n")[0])
    ap.add_argument("--pools", default=None, help="comma-separated registered pools to run (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time (1 torch thread each)")
    ap.add_argument("--prereg", default=str(PREREG), help="the registration TOML")
    ap.add_argument("--here", action="store_true", help="run this checkout's code even if it is not the registered")
    ap.add_argument("--report-only", action="store_true", help="run nothing: record the runs finished so far")
    ap.add_argument("--quick", action="store_true", help="a few minutes on capped pools; scratch output only")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    from reinforce_ada.bench.compare import CompareConfig, run_compare
    from studies.protocol.worktree import frozen_checkout, run_frozen

    args = parse(argv)
    reg = load(args.prereg)
    registered = list(reg["instrument"]["pools"])
    pools = [p for p in registered if p in (args.pools.split(",") if args.pools else registered)]
    if args.pools and len(pools) != len(args.pools.split(",")):
        raise SystemExit(f"--pools {args.pools}: registered pools are {registered}")
    fields = {**config_fields(reg, pools), "workers": args.workers}
    if args.quick:
        arms = [a for a in fields["arms"] if a.partition("=")[0] in QUICK_ARMS]
        fields.update(QUICK, arms=tuple(arms), uniform=("grpo-n2x32", "grpo-n4"), records=None)
        c = CompareConfig(**fields, run_root="runs/fewer-quick", out="runs/fewer-quick/fewer_samples")
        res = run_compare(c)
        print(json.dumps(figures(res, reg, pools)["claims"], indent=1, default=str)[:3000])
        return 0
    code = reg.get("code")
    frozen = frozen_checkout(code) if code and code != "REGISTERED_CODE" else None
    if frozen is not None and not (args.here or args.report_only):
        rc = run_frozen(code, "studies.fewer_samples.run", [*argv, "--here"])
        if rc != 0:
            return rc
        print("recording the runs and writing the result with this checkout's analysis (--report-only)")
        return main([*argv, "--report-only"])
    common = {**fields, "records": str(RAW), "run_root": "runs/fewer_samples"}
    if not args.report_only:
        run_compare(CompareConfig(**common, out=str(RAW.parent / NAME)))
        return 0
    package = str(frozen / "src" / "reinforce_ada") if frozen is not None else None
    c = CompareConfig(**common, only_cached=True, fingerprint_of=package, out=str(RAW.parent / NAME))
    return record(run_compare(c), c, reg, args, argv, pools, registered)


def figures(results: dict[str, Any], reg: dict[str, Any], pools: list[str]) -> dict[str, Any]:
    """Every pool's figures and the claims, under the run's own grid and budget (a --quick run's are smaller)."""
    from studies.fewer_samples.analysis import claims, pool_figures

    main_runs, sweep = results["runs"]["main"], results["runs"]["sweep"]
    c = results.get("config") or {}
    kw = {"uniform": c.get("uniform"), "budget": c.get("token_budget")}
    by_pool = {
        p: pool_figures([r for r in main_runs if r["pool"] == p], [r for r in sweep if r["pool"] == p], reg, **kw)
        for p in pools
        if any(r["pool"] == p for r in main_runs)
    }
    return {"by_pool": by_pool, "claims": claims(by_pool, reg)}


def record(
    results: dict[str, Any],
    c: Any,
    reg: dict[str, Any],
    args: argparse.Namespace,
    argv: list[str],
    pools: list[str],
    registered: list[str],
) -> int:
    """Compact the finished runs into the records file with the result's context, then write the result."""
    from studies.fewer_samples import regenerate
    from studies.fewer_samples.analysis import value_errors
    from studies.protocol import records
    from studies.protocol.prereg import provenance

    ids = record_ids(results)
    runs = []
    for rs in results["runs"].values():
        for r in rs:
            run = records.compact(r, c.steps, ids[id(r)])
            if r["phase"] == "main":  # V1's inputs, reduced to each run's means
                run["errors"] = value_errors([r])[r["arm"]] if value_errors([r]) else {}
                run["prior"] = r.get("prior")
            runs.append(run)
    meta = {k: results[k] for k in ("date", "machine", "arms", "code_fingerprint", "git_commit", "testbed", "pools")}
    meta["config"] = dataclasses.asdict(c)
    meta["registration"] = {**provenance(args.prereg), "content": reg}
    meta["command"] = "python -m studies.fewer_samples.run " + " ".join(a for a in argv if a != "--report-only")
    meta["recorded"] = datetime.date.today().isoformat()
    meta["lrs_by_pool"] = results["lrs_by_pool"]
    ctx = {"name": NAME, "meta": json.loads(json.dumps(meta, default=str)), "pools_run": pools}
    ctx["runs"] = {phase: [ids[id(r)] for r in rs] for phase, rs in results["runs"].items()}
    records.update(RECORDS, ctx, runs)
    regenerate.write(ctx, records.runs_of(ctx, records.read(RECORDS)[0]))
    return 0


def record_ids(results: dict[str, Any]) -> dict[int, str]:
    """Each run's id: the name of its record file in RAW (found by key, pool and total seconds)."""
    index = {}
    for f in RAW.glob("*.json.gz"):
        with gzip.open(f, "rt") as fh:
            r = json.load(fh)
        index[(r["key"], r["pool"], r["seconds"]["total"])] = f.name[:24]
    return {id(r): index[(r["key"], r["pool"], r["seconds"]["total"])] for rs in results["runs"].values() for r in rs}


if __name__ == "__main__":
    from reinforce_ada.errors import ConfigError

    try:
        sys.exit(main(sys.argv[1:]))
    except ConfigError as e:
        sys.exit(f"error: {e}")
