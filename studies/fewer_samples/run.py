"""Fewer samples, more prompts: SPO against the grid of uniform GRPO (n x prompts per step), every arm to the same
token budget, pre-registered (registrations/preregistration.toml).

    nice -n 10 python -m studies.fewer_samples.run --workers 2          # run what is missing (CPU-hours in all)
    nice -n 10 python -m studies.fewer_samples.run --workers 2 --pools hard   # only one pool's jobs
    nice -n 10 python -m studies.fewer_samples.run --workers 2 --prereg REG   # a later registration (results/<name>/)
    python -m studies.fewer_samples.run --report-only                   # run nothing: record and write what finished
    python -m studies.fewer_samples.run --quick --pools hard            # minutes; scratch (runs/fewer-quick, --scratch)
    python -m studies.fewer_samples.regenerate                          # the committed result from the records

The study takes more CPU-hours than a session has, and the machine is wiped between sessions: only what is committed
survives. So the committed compact records file (results/records.jsonl.gz) is the study's state (`protocol.resume`):
1) The registered commit's package plans and runs the jobs (`protocol.jobrunner`, in a subprocess with the detached
   worktree of the registration's `code` first on the path: `protocol.worktree`), in `bench.compare.run_compare`'s
   order (the lr sweep on every pool, grown at an edge, then the main runs seed by seed across arms); a job is run
   only when neither the records file nor the raw folder (runs/fewer_samples/records, scratch) holds it.
2) This checkout compacts each run as it finishes (within `--poll` seconds, and when the session ends or is stopped)
   into the records file with the result's context, then writes results/fewer_samples.{json,png} (`regenerate`); a
   result missing seeds or pools says so in `partial`. Commit results/ before the session stops: a fresh clone then
   runs only what is missing, its lr choice read from the recorded sweep runs' curves. A later registration (one with
   a `name`) keeps the same in results/<name>/ (`study.places`).
3) A recorded run whose job the plan now makes differently (the registration or the code edited after runs started)
   stops the session, naming the pool and arm, before anything runs. Arms a dated amendment stops (`study.stopped`)
   are planned no more; their recorded runs stay in the records file, apart (`protocol.resume`, 5).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import signal
import sys
from pathlib import Path
from typing import Any

from studies.fewer_samples.study import PREREG, ROOT, config_fields, load, name_of, places, pool_names, stopped
from studies.protocol.resume import Places, Study

QUICK = {"pool_size": 256, "seeds": 1, "other_seeds": 1, "sweep_seeds": 1, "token_budget": 12000, "eval_points": 4}
QUICK_ARMS = ("grpo-n2x32", "grpo-n4", "spo-64", "spo-64-prior")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m studies.fewer_samples.run", description=__doc__.split("\n")[0])
    ap.add_argument("--pools", default=None, help="comma-separated registered pool names whose jobs run (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time (1 torch thread each)")
    ap.add_argument("--prereg", default=str(PREREG), help="the registration TOML")
    ap.add_argument("--here", action="store_true", help="run this checkout's code even if it is not the registered")
    ap.add_argument("--report-only", action="store_true", help="run nothing: record the runs finished so far")
    ap.add_argument("--quick", action="store_true", help="a few minutes on capped pools; scratch output only")
    ap.add_argument("--scratch", default="runs/fewer-quick", help="with --quick: where its records and result go")
    ap.add_argument("--poll", type=float, default=30.0, help="seconds between records-file updates while running")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    from studies.fewer_samples import regenerate
    from studies.protocol import records, resume

    args = parse(argv)
    reg = load(args.prereg)
    registered = pool_names(reg)
    run_pools = args.pools.split(",") if args.pools else None
    if run_pools and set(run_pools) - set(registered):
        raise SystemExit(f"--pools {args.pools}: registered pools are {registered}")
    fields = config_fields(reg, list(reg["instrument"]["pools"]))  # every pool is planned: --pools limits what runs
    where = places(reg)
    if args.quick:
        arms = [a for a in fields["arms"] if a.partition("=")[0] in QUICK_ARMS]
        fields.update(QUICK, arms=tuple(arms), uniform=("grpo-n2x32", "grpo-n4"))
        scratch = Path(args.scratch).resolve()
        where = Places(scratch / "records.jsonl.gz", scratch / "records", scratch, scratch)
    study = build_study(reg, fields, args)
    signal.signal(signal.SIGTERM, _terminated)  # a stopped session still records what finished
    ctx = resume.session(
        study, where, package_of(reg, args.here), run=not args.report_only, run_pools=run_pools, poll_s=args.poll
    )
    res = regenerate.write(ctx, records.runs_of(ctx, records.read(where.records)[0]), where.out)
    n = {phase: len(ids) for phase, ids in ctx["runs"].items()}
    print(
        f"recorded {n} runs in {where.records}; wrote {where.out / study.name}.json and .png"
        + (f" (partial: {res['partial'][:300]}...)" if res["partial"] else "")
    )
    print({k: v.get("verdict") for k, v in res["claims"].items()})
    return 0


def build_study(reg: dict[str, Any], fields: dict[str, Any], args: argparse.Namespace) -> Study:
    """The study as `protocol.resume` runs it: `fields` (`study.config_fields`) for the runner, this study's
    compaction and the result's context."""
    compact = functools.partial(compact_run, steps=fields["steps"])
    meta = context_meta(reg, fields, args)
    return Study(name_of(reg), {**fields, "workers": args.workers}, compact, meta, frozenset(stopped(reg)))


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def package_of(reg: dict[str, Any], here: bool) -> Path:
    """The `reinforce_ada` folder that runs the jobs: the registered commit's (a detached worktree), or this
    checkout's with `here` or when the registration names no commit yet."""
    from studies.protocol.worktree import frozen_checkout

    code = reg.get("code")
    if here or not code or code == "REGISTERED_CODE":
        return ROOT / "src" / "reinforce_ada"
    return frozen_checkout(code) / "src" / "reinforce_ada"


def compact_run(record: dict[str, Any], run_id: str, steps: int) -> dict[str, Any]:
    """A full record as the records file keeps it (`protocol.records.compact`), a main run with V1's inputs reduced
    to its means (`analysis.value_errors`) and its prior pass."""
    from studies.fewer_samples.analysis import value_errors
    from studies.protocol import records

    run = records.compact(record, steps, run_id)
    if record["phase"] == "main":
        errors = value_errors([record])
        run["errors"] = errors[record["arm"]] if errors else {}
        run["prior"] = record.get("prior")
    return run


SESSION_FIELDS = ("workers", "records", "run_root", "out", "only_cached", "fingerprint_of")
"""`CompareConfig` fields a session chooses (places, processes): not the result's settings, so not in its context."""


def context_meta(reg: dict[str, Any], fields: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The result's settings, the registration as it is now and the command that makes it; nothing a session chooses
    (`SESSION_FIELDS`, the pools it ran), so the same finished runs give the same result wherever they were made."""
    from reinforce_ada.bench.compare import CompareConfig
    from studies.protocol.prereg import provenance

    def rel(p: Path) -> str:
        return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)

    config = {k: v for k, v in dataclasses.asdict(CompareConfig(**fields)).items() if k not in SESSION_FIELDS}
    command = "python -m studies.fewer_samples.run" + " --quick" * args.quick + " --here" * args.here
    if Path(args.prereg).resolve() != PREREG:
        command += f" --prereg {args.prereg}"
    registration = {**provenance(args.prereg), "content": reg}
    registration["path"] = rel(Path(registration["path"]))
    return {"config": config, "registration": registration, "command": command}


if __name__ == "__main__":
    from reinforce_ada.errors import ConfigError
    from studies.protocol.jobrunner import StudyChanged

    try:
        sys.exit(main(sys.argv[1:]))
    except (ConfigError, StudyChanged) as e:
        sys.exit(f"error: {e}")
