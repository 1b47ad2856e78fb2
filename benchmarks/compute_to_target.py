"""Compute to target (issue 22): every arm against the best uniform GRPO, with the oracle's ceiling, pre-registered.

`reinforce-ada compare` run as benchmarks/preregistration.toml says -- its pools, seeds, horizon, targets, arms, lr
grid and sweep -- with this repository's bookkeeping:

    nice -n 10 python -m benchmarks.compute_to_target --workers 2             # every registered pool (many
                                                                             # CPU-hours: resumable, see below)
    nice -n 10 python -m benchmarks.compute_to_target --workers 2 --pools hard   # one tranche
    python -m benchmarks.compute_to_target --table        # each written JSON's table
    python -m benchmarks.compute_to_target --opening      # BENCHMARKS.md's opening table: all registered pools
    python -m benchmarks.compute_to_target --quick        # a few minutes, scratch output (runs/compute-quick)

1) The code that runs is the registered commit (`code` in the file): the script runs the package from a detached
   worktree of that commit (under the system temp folder; this checkout's `benchmarks/` does the bookkeeping), so
   the records of a long benchmark keep their keys while the library moves on, and no edit made during a run
   reaches its worker processes. When the runs end, the results are written again by `--report-only` from the same
   records with this checkout's analysis (so a fix to the statistics or the bookkeeping reaches them).
2) Resumable: every finished run is a gzip'd record in benchmarks/results/compute_records/ (commit them); a stopped
   run, in this session or another on another machine, reuses them and runs only what is missing. Jobs go seed by
   seed across arms, so a run cut short leaves every arm with the same first seeds.
3) Output: benchmarks/results/compute_to_target.{json,png} when every registered pool is in the run, else
   compute_to_target_<pools>.{json,png} (a tranche, labelled partial); `summary.json` gets C0, C1, C2, C2g and C3 per
   pool run (other pools' entries are kept). Another registration file (`--prereg benchmarks/preregistration_X.toml`,
   e.g. issue 23's allocator) writes compute_to_target_<pools>_X.{json,png} and summary figures `C1[X]` etc.
4) A re-run with other seeds (issue 22, 5): a pre-registration with `rerun_of` (benchmarks/preregistration_rerun.toml)
   runs its own seeds, one pool at a time, each arm at the lr the first run chose on that pool (no sweep), and writes
   compute_to_target_<pool>_rerun.{json,png} with `agreement` (`bench.compute.rerun_agreement`: per arm and cost
   axis, do the two runs' 90% intervals overlap, and does the re-run's factor fall in the first run's interval) and
   its `verdict` by the registered criterion (and `verdict_amended` where the registration amends it;
   benchmarks/compute_rerun.py), written by the closing --report-only pass.
   Pools without a first run yet are skipped, said so. It leaves `summary.json` alone.

    nice -n 10 python -m benchmarks.compute_to_target --workers 2 --prereg benchmarks/preregistration_rerun.toml \
        --pools hard
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.compute_rerun import agreement_with_first, first_run, rerun_fields, rerun_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PREREG = ROOT / "benchmarks" / "preregistration.toml"
RECORDS = RESULTS / "compute_records"
WHAT = {
    "C0": "tokens to target, best uniform GRPO / the best oracle arm (the ceiling for signal-maximising allocators)",
    "C1": "tokens to target, best uniform GRPO / the registered adaptive arm (time-scale factor, paired seeds)",
    "C2": "CPU wall-clock to target (recorded step times), best uniform GRPO on that axis / the registered arm",
    "C2g": "wall-clock to target under the GPU cost model (bench.costmodel), best uniform on that axis / the arm",
    "C3": "the registered arm's share of the oracle's gain on tokens, (k_arm - 1) / (k_oracle - 1)",
}


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compute_to_target", description=__doc__.split("\n")[0])
    ap.add_argument("--pools", default=None, help="comma-separated registered pools to run (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time (1 torch thread each)")
    ap.add_argument("--prereg", default=str(PREREG), help="the pre-registration TOML (default: the repository's)")
    ap.add_argument("--table", action="store_true", help="print each results JSON's table and exit")
    ap.add_argument(
        "--opening",
        action="store_true",
        help="print BENCHMARKS.md's opening table: every pool of --prereg, from the results written under that "
        "registration, in one table, then C0-C3 per pool, and exit",
    )
    ap.add_argument(
        "--rerun-table",
        action="store_true",
        help="with --prereg of a re-run: BENCHMARKS.md's re-run table (both runs' C0-C3 per pool, the agreement "
        "counts and verdicts), and exit",
    )
    ap.add_argument(
        "--tiebreak",
        metavar="TOML",
        help="a tie-break registration (a third seed set for the cells a re-run disagreed on): read its cells in all "
        "three runs, store the reading in the third set's result JSON, print the table, and exit",
    )
    ap.add_argument("--quick", action="store_true", help="a few minutes on small pools; scratch output only")
    ap.add_argument("--here", action="store_true", help="run this checkout's code even if it is not the registered")
    ap.add_argument("--no-summary", action="store_true", help="do not touch summary.json")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write the results from the records finished so far (this checkout's analysis, the "
        "registered commit's records), labelled partial where seeds or pools are missing",
    )
    ap.add_argument("--carry-pass", choices=("prepare", "check"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def frozen_checkout(commit: str) -> Path:
    """A detached worktree of the registered commit (made once, under the system temp folder). The benchmark always
    runs from it, never from this checkout: its worker processes import the package afresh, and an edit made here
    while a long run goes on must not reach them."""
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    if known.returncode != 0:
        raise SystemExit(f"the registered code commit {commit!r} is not in this repository")
    path = Path(tempfile.gettempdir()) / f"reinforce-ada-code-{commit[:12]}"
    if not (path / "src").exists():  # a worktree whose folder was cleared (a new machine, /tmp wiped) is pruned first
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(path), commit], cwd=ROOT, check=True)
    return path


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


def carry_of(reg: dict[str, Any]) -> Any:
    """The registration's `[carry]` as a `bench.carry.Carry` (the other commit from a frozen worktree)."""
    from reinforce_ada.bench.carry import Carry

    t = reg["carry"]
    return Carry(str(frozen_checkout(t["from"]) / "src" / "reinforce_ada"), tuple(t["arms"]), tuple(t["check_seeds"]))


def carry_pass(argv: list[str], mode: str) -> int:
    """A report-only pass over the records that carries the other commit's records into place (`prepare`) or checks
    them (`check`: every carried (pool, arm) whose same-seed checks are not all `same` loses its carried records, so
    the registered code runs it). Returns how many (pool, arm) were removed."""
    rest = [a for a in argv if a not in ("--report-only",)]
    return main([*rest, "--report-only", "--no-summary", f"--carry-pass={mode}"])


def finish_carry_pass(c: Any, carrier: Any, mode: str) -> int:
    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.errors import ConfigError

    try:
        run_compare(c, log=lambda m: None, carry=carrier)
    except ConfigError:  # nothing to report yet: the carrying is done all the same
        pass
    if mode == "prepare":
        print(f"carry: {carrier.copied} records carried from {carrier.fingerprint[:12]}; "
              f"{len(carrier.checks)} same-seed checks left for the registered code to run", flush=True)  # fmt: skip
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


def registration_tag(path: str | Path) -> str:
    """ "" for the repository's first registration; else the file's stem without `preregistration_` (`rerun`, `iw`):
    the suffix of that registration's result files and of its summary.json figures (`C1[iw]`)."""
    if Path(path).resolve() == PREREG.resolve():
        return ""
    return Path(path).stem.removeprefix("preregistration_").removeprefix("preregistration") or "other"


def summary_entries(results: dict[str, Any], reg: dict[str, Any] | None) -> dict[str, Any]:
    """summary.json's C-entries: per pool the figure with its t-interval, bootstrap interval, seeds and mark."""
    goals = {c["figure"]: c.get("goal") for c in (reg or {}).get("claim", [])}
    out: dict[str, Any] = {}
    for pool, figs in results["compute"]["by_pool"].items():
        for fig, h in figs.items():
            e = out.setdefault(fig, {"what": WHAT[fig], "goal": goals.get(fig), "pools": {}})
            e["pools"][pool] = {
                k: h.get(k) for k in ("value", "t_lo", "t_hi", "lo", "hi", "arm", "reference", "oracle", "per_seed")
            }
            e["pools"][pool]["preregistered"] = h["preregistration"]["preregistered"]
            e["pools"][pool]["best_after_the_fact"] = results["compute"]["best_after_the_fact"][pool]
    return out


def merge_summary(path: Path, entries: dict[str, Any], command: str) -> None:
    """Per-pool merge: a tranche updates its pools and keeps the others'."""
    from benchmarks.harness import update_summary

    old = json.loads(path.read_text()) if path.exists() else {}
    for fig, e in entries.items():
        e["pools"] = {**old.get(fig, {}).get("pools", {}), **e["pools"]}
    update_summary(path, entries, command)


def markdown_table(results: dict[str, Any]) -> str:
    """Rows = arms, columns = tokens / CPU / GPU-model factors and oracle share per pool (t-intervals)."""

    def cell(d: dict[str, Any] | None) -> str:
        if not d or d.get("value") is None:
            return "—"
        if d.get("t_lo") is None:
            return f"{d['value']:.2f}"
        return f"{d['value']:.2f} [{d['t_lo']:.2f}, {d['t_hi']:.2f}]"

    pools = list(results["by_pool"])
    head = "| arm | " + " | ".join(f"{p}: tokens | {p}: CPU s | {p}: GPU-model s | {p}: oracle share" for p in pools)
    lines = [head + " |", "|---" * (1 + 4 * len(pools)) + "|"]
    arms = list(dict.fromkeys(a for p in pools for a in results["by_pool"][p]["compute"]["table"]))
    for arm in arms:
        cells = []
        for p in pools:
            comp = results["by_pool"][p]["compute"]
            r = comp["table"].get(arm, {})
            share = r.get("oracle_share", {}).get("value")
            cells += [cell(r.get("tokens")), cell(r.get("cpu_s")), cell(r.get("gpu_s"))]
            ceiling = comp["table"].get(comp.get("oracle") or "", {}).get("tokens", {})
            if share is None:
                cells.append("—")
            elif (ceiling.get("t_lo") or 0) <= 1.0:  # the oracle gains nothing for sure: a share of it means little
                cells.append(f"({share:.2f}; C0 ≈ 1)")
            else:
                cells.append(f"{share:.2f}")
        tags = []
        for p in pools:
            comp = results["by_pool"][p]["compute"]
            if comp["axes"]["tokens"]["best_uniform"] == arm:
                tags.append(f"best uniform on {p}")
            if comp.get("oracle") == arm:
                tags.append(f"oracle on {p}")
        lines.append(f"| {arm}{' (' + ', '.join(tags) + ')' if tags else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def opening_table(by_pool: dict[str, dict[str, Any]]) -> str:
    """BENCHMARKS.md's opening table over several pools' results (pool -> that pool's results JSON): rows = arms,
    per pool the tokens factor with its 90% t-interval and the CPU / GPU-model factors, then the headline figures
    C0-C3 per pool with the arm each one reads."""
    from reinforce_ada.bench.compute import no_ceiling_gain

    def cell(d: dict[str, Any] | None, ci: bool = True) -> str:
        if not d or d.get("value") is None:
            return "—"
        if not ci or d.get("t_lo") is None:
            return f"{d['value']:.2f}"
        return f"{d['value']:.2f} [{d['t_lo']:.2f}, {d['t_hi']:.2f}]"

    comps = {p: r["by_pool"][p]["compute"] for p, r in by_pool.items()}
    pools = list(comps)
    head = "| arm | " + " | ".join(f"{p}: tokens | {p}: CPU / GPU-model" for p in pools) + " |"
    lines = [head, "|---" * (1 + 2 * len(pools)) + "|"]
    for arm in dict.fromkeys(a for c in comps.values() for a in c["table"]):
        cells, tags = [], []
        for p, c in comps.items():
            r = c["table"].get(arm)
            if r is None:
                cells += ["—", "—"]
                continue
            cells += [cell(r.get("tokens")), f"{cell(r.get('cpu_s'), False)} / {cell(r.get('gpu_s'), False)}"]
            if c["axes"]["tokens"]["best_uniform"] == arm:
                tags.append(f"best uniform: {p}")
            if c.get("oracle") == arm:
                tags.append(f"oracle: {p}")
        lines.append(f"| {arm}{' (' + '; '.join(tags) + ')' if tags else ''} | " + " | ".join(cells) + " |")
    lines += ["", "| figure | " + " | ".join(pools) + " |", "|---" * (1 + len(pools)) + "|"]
    for fig in ("C0", "C1", "C2", "C2g", "C3"):
        row = []
        for p, r in by_pool.items():
            h = r.get("compute", {}).get("by_pool", {}).get(p, {}).get(fig)
            if not h or h.get("value") is None:
                row.append("—")
                continue
            mark = "" if h.get("preregistration", {}).get("preregistered") else " (not pre-registered)"
            value = f"{h['value']:.2f}" if fig == "C3" else cell(h)
            if fig == "C3" and no_ceiling_gain(r["compute"]["by_pool"][p].get("C0")):
                mark += " (C0's interval holds 1: no ceiling gain to share)"
            row.append(f"{value} ({h.get('arm')}){mark}")
        lines.append(f"| {fig} | " + " | ".join(row) + " |")
    return "\n".join(lines)


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


def main(argv: list[str]) -> int:
    args = parse(argv)
    from reinforce_ada.bench.prereg import load, provenance

    if args.opening:
        pools = load(args.prereg)["instrument"]["pools"]
        found = {p: first_run(p, args.prereg) for p in pools}
        have = {p: f[1] for p, f in found.items() if f is not None}
        if not have:
            raise SystemExit(f"no results written under {args.prereg} in {RESULTS}: run the benchmark first")
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
        from benchmarks.compute_tiebreak import load_tiebreak, tiebreak_table, write_tiebreak

        print(tiebreak_table(write_tiebreak(load_tiebreak(args.tiebreak))))
        return 0
    if args.table:
        js = sorted(RESULTS.glob("compute_to_target*.json"))
        if not js:
            raise SystemExit(f"no compute_to_target*.json under {RESULTS}: run the benchmark first")
        for f in js:
            print(f"{f.name}:\n{markdown_table(json.loads(f.read_text()))}\n")
        return 0
    from reinforce_ada.cli import main as cli

    if args.quick:
        return cli(
            ["compare", "--quick", "--arms", "grpo-n2,grpo-n4,seq-bal,mopps,oracle-select", "--pool", "hard",
             "--pool", "small", "--sweep-each-pool", "--extend-sweep", "1", "--long-arms", "grpo-n2,grpo-n4",
             "--out", "runs/compute-quick/compute_to_target"]
        )  # fmt: skip
    reg = load(args.prereg)
    code = reg.get("code")
    fingerprint_of = None
    if code and args.report_only:
        fingerprint_of = str(frozen_checkout(code) / "src" / "reinforce_ada")
    elif code and not args.here:
        frozen = frozen_checkout(code)
        if "carry" in reg:  # put the other commit's records in place, all but the checks' (bench.carry)
            carry_pass(argv, "prepare")
        print(f"running the registered code {code[:12]} from {frozen}")
        env = {**os.environ, "PYTHONPATH": f"{frozen / 'src'}"}
        cmd = [sys.executable, "-m", "benchmarks.compute_to_target", *argv, "--here", "--prereg", args.prereg]
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        if rc == 0 and "carry" in reg and carry_pass(argv, "check"):  # some arms failed their check: run them
            print("running the registered code again for the arms whose carried records were removed")
            rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        if rc != 0:
            return rc
        # the runs are the registered code's; the tables are this checkout's analysis of the same records
        print("writing the results again from the records with this checkout's analysis (--report-only)")
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
    tag = registration_tag(args.prereg)
    whole = pools == registered and not tag
    out = RESULTS / ("compute_to_target" if whole else "compute_to_target_" + "_".join(pools))
    if tag:  # another registration's results never overwrite the first's
        out = out.with_name(f"{out.name}_{tag}")
    from reinforce_ada.bench.compare import CompareConfig, run_compare
    from reinforce_ada.bench.report import format_table, write

    c = CompareConfig(
        **{**config_fields(reg, pools), **(rerun_fields(pools[0], reg["rerun_of"]) if rerun else {})},
        workers=args.workers,
        preregistration=str(Path(args.prereg).resolve()),
        compute_arm=next((cl["arm"] for cl in reg["claim"] if cl["figure"] == "C1"), "mopps"),
        records=str(RECORDS),
        # only when reporting: the registered code (an older CompareConfig) runs the runs, and may lack these fields
        **({"only_cached": True, "fingerprint_of": fingerprint_of} if args.report_only else {}),
        run_root="runs/compute",
        out=str(out),
    )
    carrier = None
    if "carry" in reg and args.report_only:
        from reinforce_ada.bench.carry import Carrier

        carrier = Carrier(carry_of(reg), RECORDS)
    if args.carry_pass:
        return finish_carry_pass(c, carrier, args.carry_pass)
    # the registered code (run with --here from its worktree) may predate `carry`: pass it only when carrying
    results = run_compare(c, carry=carrier) if carrier is not None else run_compare(c)
    results["partial"] = partial(results, reg, pools, pools if rerun else registered)  # a re-run goes pool by pool
    if carrier is not None:
        results["carried"] = carrier.summary()
        bad = {k: v for k, v in results["carried"]["verdicts"].items() if v != "same"}
        if bad:
            print(f"WARNING: carried records not confirmed by their same-seed check: {bad}", flush=True)
        print(f"carry: removed {carrier.clear()} carried copies (derived: the next run or report makes them again)")
    results["preregistration_file"] = provenance(args.prereg)
    if rerun and args.report_only:  # this checkout's analysis (the registered code may predate `rerun_agreement`)
        results["agreement"] = agreement_with_first(results, reg, pools[0])
        n, v = results["agreement"]["counts"], results["agreement"]["verdict"]
        print(f"agreement with {results['agreement']['first_run']}: {n['overlap']} of {n['cells']} (arm, axis) "
              f"intervals overlap ({n.get('expected_apart_if_same')} apart expected from seed noise alone, "
              f"not pre-registered); {n['inside']} re-run factors fall in the first run's interval "
              f"({n.get('expected_inside_if_same')} expected); "
              f"verdict: {'agrees' if v['agrees'] else 'does not agree'} ({v['why']})")  # fmt: skip
        if results["agreement"].get("joint_null"):
            j = results["agreement"]["joint_null"]
            print(f"seed noise with whole seeds shuffled (not pre-registered): {j['apart_mean']} distinct cells apart "
                  f"on average, {j['apart_quantile']} at {j['level']:.0%}; P(no cell apart) {j['p_none_apart']}, "
                  f"P(registered criterion passes) {j['p_registered_passes']}; "
                  f"tokens shift p {j['claimed_shift_p']}")  # fmt: skip
        if "verdict_amended" in results["agreement"]:
            a = results["agreement"]["verdict_amended"]
            print(f"amended criterion ({'pre-registered' if a['preregistered'] else 'after the fact'} on this pool): "
                  f"{'agrees' if a['agrees'] else 'does not agree'} ({a['why']})")  # fmt: skip
    command = "python -m benchmarks.compute_to_target " + " ".join(argv)
    js, png = write(results, out, command, series=False)
    print(format_table(results))
    print(f"wrote {js} and {png}")
    if not args.no_summary and not rerun:
        entries = summary_entries(results, reg)
        merge_summary(RESULTS / "summary.json", {f"{k}[{tag}]" if tag else k: v for k, v in entries.items()}, command)
        print(f"updated {RESULTS / 'summary.json'}")
    return 0


if __name__ == "__main__":
    from reinforce_ada.errors import ConfigError

    try:
        sys.exit(main(sys.argv[1:]))
    except ConfigError as e:
        sys.exit(f"error: {e}")
