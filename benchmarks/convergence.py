"""Convergence benchmark: every sampling strategy side by side on the embedded testbed.

Same as `reinforce-ada compare`; see `reinforce_ada.compare` for the design and `BENCHMARKS.md` for results.

    python benchmarks/convergence.py            # 8 arms x 3 seeds x 300 steps (about 40 minutes on 2 cores)
    python benchmarks/convergence.py --quick    # a few minutes
"""

from __future__ import annotations

import sys

from reinforce_ada.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
