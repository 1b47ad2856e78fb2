"""Convergence benchmark: every sampling strategy side by side on the shipped testbed, with 90% intervals.

`reinforce-ada compare` with this repository's bookkeeping: results go to benchmarks/results/convergence.{json,png}
(unless --out says otherwise) and the goals (P1...) into benchmarks/results/summary.json (unless --no-summary or
--quick); `reinforce_ada.bench.compare` has the design, `BENCHMARKS.md` the results.

    nice -n 10 python benchmarks/convergence.py --workers 2   # lr sweep + every arm on both pools (about an hour
                                                             # on 2 idle cores; writes benchmarks/results/)
    python benchmarks/convergence.py --quick                 # every arm, a few minutes, runs/compare-quick only
    # a second, independent run of the headline arms: other seeds, the first run's learning rates
    nice -n 10 python benchmarks/convergence.py --workers 2 --arms grpo-n4,seq-bal,grpo-matched --seed-offset 100 \\
        --lrs-from benchmarks/results/convergence.json --out benchmarks/results/convergence_rerun --no-summary
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reinforce_ada.bench.summary import update_summary
from reinforce_ada.cli import main

RESULTS = Path(__file__).resolve().parent / "results"


def run(argv: list[str]) -> int:
    if "--quick" in argv and "--out" in argv:
        out = Path(argv[argv.index("--out") + 1]).resolve()
        if out.is_relative_to(RESULTS):
            raise SystemExit(f"--quick writes scratch results only; --out {out} is under {RESULTS}")
    summary = "--no-summary" not in argv and "--quick" not in argv
    argv = [a for a in argv if a != "--no-summary"]
    if "--out" not in argv and "--quick" not in argv:
        argv += ["--out", str(RESULTS / "convergence")]
    code = main(["compare", *argv])
    if code == 0 and summary:
        out = Path(argv[argv.index("--out") + 1])
        results = json.loads(out.with_suffix(".json").read_text())
        command = "python benchmarks/convergence.py " + " ".join(sys.argv[1:])
        # P4 belongs to benchmarks/step_time.py (interleaved arms); the convergence run's ratio is kept beside it
        update_summary(out.parent / "summary.json", results["goals"], command, nested={"P4": "convergence_run"})
        print(f"updated {out.parent / 'summary.json'}")
    return code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
