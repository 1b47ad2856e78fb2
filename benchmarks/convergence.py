"""Convergence benchmark: every sampling strategy side by side on the shipped testbed, with 90% intervals.

Same as `reinforce-ada compare`; `reinforce_ada.bench.compare` has the design, `BENCHMARKS.md` the results.

    nice -n 10 python benchmarks/convergence.py --workers 2   # lr sweep + every arm on both pools (about an hour
                                                             # on 2 idle cores; writes benchmarks/results/)
    python benchmarks/convergence.py --quick                 # every arm, a few minutes, runs/compare-quick only
    # a second, independent run of the headline arms: other seeds, the first run's learning rates
    nice -n 10 python benchmarks/convergence.py --workers 2 --arms grpo-n4,seq-bal,grpo-matched --seed-offset 100 \\
        --lrs-from benchmarks/results/convergence.json --out benchmarks/results/convergence_rerun --no-summary
"""

from __future__ import annotations

import sys

from reinforce_ada.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
