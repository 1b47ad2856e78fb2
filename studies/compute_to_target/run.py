"""Compute to target: every arm against the best uniform GRPO, with the oracle's ceiling, pre-registered.

`reinforce-ada compare` run as a registration says (registrations/preregistration*.toml: its pools, seeds, horizon,
targets, arms, lr grid and sweep), with the study's bookkeeping:

    nice -n 10 python -m studies.compute_to_target.run --workers 2                # every registered pool (many
                                                                                 # CPU-hours: resumable, see below)
    nice -n 10 python -m studies.compute_to_target.run --workers 2 --pools hard   # one tranche
    python -m studies.compute_to_target.run --table       # each result JSON's table
    python -m studies.compute_to_target.run --opening     # README.md's opening table: all registered pools
    python -m studies.compute_to_target.run --quick       # a few minutes, scratch output (runs/compute-quick)
    python -m studies.compute_to_target.regenerate        # every committed result from the records (nothing runs)

1) The code that runs is the registered commit (`code` in the file): the runs use the package of a detached
   worktree of that commit (`protocol.worktree`; this checkout's `studies/` does the bookkeeping), so the records of
   a long study keep their keys while the library moves on, and no edit made during a run reaches its workers.
2) Resumable: every finished run's full record is kept under runs/compute/records (scratch: carry that folder along
   to continue on another machine); a stopped run reuses them and runs only what is missing. Jobs go seed by seed
   across arms, so a run cut short leaves every arm with the same first seeds.
3) When the runs end (or with --report-only), a report pass with this checkout's package reads the registered
   commit's records (`fingerprint_of`), with another commit's records carried in where the registration has a
   `[carry]` table (`protocol.carry`, after a same-seed check); the runs, compacted, and the result's context go into
   results/records.jsonl.gz, and the result is written from there by `regenerate` (JSON, PNG, summary.json's C0, C1,
   C2, C2g and C3 per pool, other pools' entries kept).
4) Output: results/compute_to_target_<pools>.{json,png} (a tranche; every registered pool: compute_to_target);
   another registration (`--prereg .../preregistration_X.toml`) writes compute_to_target_<pools>_X and summary
   figures `C1[X]` etc.
5) A re-run with other seeds: a registration with `rerun_of` (preregistration_rerun.toml) runs its own seeds, one
   pool at a time, each arm at the lr the first run chose on that pool (no sweep); its result carries `agreement`
   (`rerun`: the registered criterion's `verdict`, and `verdict_amended` where the registration amends it). Pools
   without a first run yet are skipped, said so. It leaves summary.json alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from studies.compute_to_target.record import record
from studies.compute_to_target.rerun import first_run, rerun_table
from studies.compute_to_target.study import PREREG, RESULTS


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m studies.compute_to_target.run", description=__doc__.split("\n")[0])
    ap.add_argument("--pools", default=None, help="comma-separated registered pools to run (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time (1 torch thread each)")
    ap.add_argument("--prereg", default=str(PREREG), help="the pre-registration TOML (default: the study's first)")
    ap.add_argument("--table", action="store_true", help="print each result JSON's table and exit")
    ap.add_argument(
        "--opening",
        action="store_true",
        help="print the opening table: every pool of --prereg, from "
        "the results written under that registration, then C0-C3 per pool, and exit",
    )
    ap.add_argument(
        "--rerun-table",
        action="store_true",
        help="with --prereg of a re-run: both runs' C0-C3 per pool, the agreement counts and verdicts, and exit",
    )
    ap.add_argument(
        "--tiebreak",
        metavar="TOML",
        help="a tie-break registration: print the reading stored in its "
        "third set's result (`regenerate` reads it), and exit",
    )
    ap.add_argument("--quick", action="store_true", help="a few minutes on small pools; scratch output only")
    ap.add_argument("--here", action="store_true", help="run this checkout's code even if it is not the registered")
    ap.add_argument("--no-summary", action="store_true", help="do not touch summary.json")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: record and write the results from the "
        "runs finished so far, labelled partial where seeds or pools are missing",
    )
    ap.add_argument("--carry-pass", choices=("prepare", "check"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def carry_pass(argv: list[str], mode: str) -> int:
    """A report pass over the records that carries the other commit's records into place (`prepare`) or checks them
    (`check`: every carried (pool, arm) whose same-seed checks are not all `same` loses its carried records, so the
    registered code runs it). Returns how many (pool, arm) were removed."""
    rest = [a for a in argv if a not in ("--report-only",)]
    return main([*rest, "--report-only", "--no-summary", f"--carry-pass={mode}"])


def tables(args: argparse.Namespace) -> int | None:
    """The printing modes (--opening, --rerun-table, --tiebreak, --table, --quick); None when none was asked for."""
    from studies.compute_to_target.tables import markdown_table, opening_table
    from studies.compute_to_target.tiebreak import load_tiebreak, tiebreak_table
    from studies.protocol.prereg import load

    if args.opening:
        pools = load(args.prereg)["instrument"]["pools"]
        have = {p: f[1] for p in pools if (f := first_run(p, args.prereg)) is not None}
        if not have:
            raise SystemExit(f"no results written under {args.prereg} in {RESULTS}: run the study first")
        missing = [p for p in pools if p not in have]
        print(opening_table(have) + (f"\n\nnot yet measured: {', '.join(missing)}" if missing else ""))
        return 0
    if args.rerun_table:
        reg = load(args.prereg)
        if not reg.get("rerun_of"):
            raise SystemExit(f"{args.prereg} is not a re-run's registration (no rerun_of): pass --prereg of one")
        print(rerun_table(reg["instrument"]["pools"], reg["rerun_of"]))
        return 0
    if args.tiebreak:
        reg = load_tiebreak(args.tiebreak)
        stored = json.loads((RESULTS / Path(reg["result"]).name).read_text()).get("tiebreak")
        if stored is None:
            raise SystemExit(
                f"{reg['result']} holds no tie-break reading: run `python -m studies.compute_to_target.regenerate`"
            )
        print(tiebreak_table(stored))
        return 0
    if args.table:
        js = sorted(RESULTS.glob("compute_to_target*.json"))
        if not js:
            raise SystemExit(f"no compute_to_target*.json under {RESULTS}: run the study first")
        for f in js:
            print(f"{f.name}:\n{markdown_table(json.loads(f.read_text()))}\n")
        return 0
    if args.quick:
        from studies.protocol.compare import main as study_compare

        return study_compare(
            [
                "--quick",
                "--arms",
                "grpo-n2,grpo-n4,seq-bal,mopps,oracle-select",
                "--pool",
                "hard",
                "--pool",
                "small",
                "--sweep-each-pool",
                "--extend-sweep",
                "1",
                "--long-arms",
                "grpo-n2,grpo-n4",
                "--out",
                "runs/compute-quick/compute_to_target",
            ]
        )
    return None


def main(argv: list[str]) -> int:
    args = parse(argv)
    done = tables(args)
    if done is not None:
        return done
    from studies.protocol.prereg import load
    from studies.protocol.worktree import frozen_checkout, run_frozen

    reg = load(args.prereg)
    code = reg.get("code")
    if code and not (args.here or args.report_only):
        frozen_checkout(code)
        if "carry" in reg:  # put the other commit's records in place, all but the checks' (`protocol.carry`)
            carry_pass(argv, "prepare")
        child = ["--here", "--no-summary", "--prereg", args.prereg]
        rc = run_frozen(code, "studies.compute_to_target.run", [*argv, *child])
        if rc == 0 and "carry" in reg and carry_pass(argv, "check"):  # some arms failed their check: run them
            print("running the registered code again for the arms whose carried records were removed")
            rc = run_frozen(code, "studies.compute_to_target.run", [*argv, *child])
        if rc != 0:
            return rc
        # the runs are the registered code's; the result is this checkout's analysis of the same records
        print("recording the runs and writing the result with this checkout's analysis (--report-only)")
        return main([*argv, "--report-only"])
    registered = list(reg["instrument"]["pools"])
    pools = args.pools.split(",") if args.pools else registered
    unknown = sorted(set(pools) - set(registered))
    if unknown:
        raise SystemExit(f"--pools {unknown} are not registered in {args.prereg} (registered: {registered})")
    pools = [p for p in registered if p in pools]
    rerun = bool(reg.get("rerun_of"))
    if rerun and len(pools) > 1:  # each pool at its own first-run lrs: one compare per pool
        rest = [a for i, a in enumerate(argv) if a != "--pools" and (i == 0 or argv[i - 1] != "--pools")]
        rest = [a for a in rest if not a.startswith("--pools=")]
        ready = [p for p in pools if first_run(p, reg["rerun_of"])]
        if len(ready) < len(pools):
            print(f"re-run: no first run yet of {sorted(set(pools) - set(ready))}; running {ready}", flush=True)
        for pool in ready:
            rc = main([*rest, "--pools", pool])
            if rc != 0:
                return rc
        return 0
    return record(args, argv, reg, pools, registered, rerun, frozen_checkout(code) if code else None)


if __name__ == "__main__":
    from reinforce_ada.errors import ConfigError

    try:
        sys.exit(main(sys.argv[1:]))
    except ConfigError as e:
        sys.exit(f"error: {e}")
