"""Convergence study: every sampling strategy side by side on the shipped testbed, with 90% intervals, and the
goals P1-P4.

`reinforce-ada compare` with the study protocol (`protocol.compare`: the goals per pool, `--check-against`) and this
study's bookkeeping: the runs go to results/records.jsonl.gz (as the result JSON used to hold them: per-step series
at 4 significant digits) and the result is written from there (`regenerate`), the goals (P1...) into
results/summary.json unless --no-summary or --quick; `reinforce_ada.bench.compare` has the design, README.md the
results.

    nice -n 10 python -m studies.convergence.run --workers 2   # lr sweep + every arm on both pools (about an hour
                                                              # on 2 idle cores; writes results/)
    python -m studies.convergence.run --quick                 # every arm, a few minutes, runs/compare-quick only
    # a second, independent run of the headline arms: other seeds, the first run's learning rates
    nice -n 10 python -m studies.convergence.run --workers 2 --arms grpo-n4,seq-bal,grpo-matched --seed-offset 100 \\
        --lrs-from studies/convergence/results/convergence.json --out studies/convergence/results/convergence_rerun \\
        --no-summary --check-against studies/convergence/results/convergence.json
    python -m studies.convergence.regenerate                  # every committed result from the records
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from studies.convergence.regenerate import RECORDS, RESULTS


def run(argv: list[str]) -> int:
    if "--quick" in argv and "--out" in argv:
        out = Path(argv[argv.index("--out") + 1]).resolve()
        if out.is_relative_to(RESULTS):
            raise SystemExit(f"--quick writes scratch results only; --out {out} is under {RESULTS}")
    summary = "--no-summary" not in argv and "--quick" not in argv
    argv = [a for a in argv if a != "--no-summary"]
    if "--out" not in argv and "--quick" not in argv:
        argv += ["--out", str(RESULTS / "convergence")]
    if "--quick" in argv:
        from studies.protocol.compare import main

        return main(argv)
    return record(argv, summary)


def record(argv: list[str], summary: bool) -> int:
    """Run the comparison, put its runs and context in the records file, and write the result from there."""
    import dataclasses

    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.bench.report import _jsonable, _rounded
    from reinforce_ada.cli.checks import read_json_object
    from studies.protocol import records
    from studies.protocol.compare import config, parse
    from studies.protocol.compare_results import skeleton, study_figures

    ours, args = parse(argv)
    c = config(ours, args)
    if ours.check_against:
        read_json_object("--check-against", ours.check_against)
    results = run_compare(c)
    results["config"] = settings = dataclasses.asdict(c)
    study_figures(results, settings, None, tables=False)
    runs = {}
    for phase, rs in results["runs"].items():
        for r in rs:
            r = json.loads(json.dumps(_rounded({k: v for k, v in r.items() if k != "spec"}), default=_jsonable))
            rid = hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:24]  # the run's content
            runs.setdefault(phase, []).append({"id": rid, **r})
    out = Path(c.out)
    derived = ("lr_sweep", "lrs", "lrs_by_pool", "runs", "by_pool", "missing", "compute", "goals")
    meta = {k: v for k, v in results.items() if k not in derived}
    meta["command"] = "python -m studies.convergence.run " + " ".join(argv)
    sk = skeleton({**results, "command": meta["command"], **({"agreement": 1} if ours.check_against else {})})
    sk["by_pool"] = [k for k in sk["by_pool"] if k != "compute"]
    ctx = {"name": out.name, "meta": json.loads(json.dumps(_rounded(meta), default=_jsonable)), "skeleton": sk}
    ctx["runs"] = {phase: [r["id"] for r in rs] for phase, rs in runs.items()}
    if ours.check_against:
        ctx["check_against"] = ours.check_against
    if summary:
        stamp = {"command": meta["command"], "date": meta["date"]}
        ctx["summary"] = {**stamp, "p4": stamp}
    records.update(out.parent / RECORDS.name, ctx, [r for rs in runs.values() for r in rs])
    from studies.convergence.regenerate import regenerate

    regenerate(out.parent, out.parent / RECORDS.name)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
