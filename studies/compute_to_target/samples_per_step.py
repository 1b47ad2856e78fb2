"""How much of each arm's tokens factor is its samples per step? (read from the committed results; nothing runs)

    python -m studies.compute_to_target.samples_per_step      # prints the table, writes results/samples_per_step.json

A model with no learning in it -- every arm learns per step exactly as fast as the best uniform arm -- predicts an
arm's tokens factor as (best uniform arm's samples per step) / (the arm's), its median over the run. Per pool of the
first registration, the Spearman rank correlation of that prediction with the measured tokens factors
(`bench.compute`), over every non-oracle arm and over the non-uniform ones alone, beside each arm's prediction and
measurement.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from studies.compute_to_target.study import RESULTS

POOLS = ("hard", "small", "default", "mixed")
ORACLES = ("oracle-select", "oracle-alloc", "oracle-both")
UNIFORM = ("grpo-n2", "grpo-n4", "grpo-n8", "grpo-n16")


def ranks(x: list[float]) -> np.ndarray:
    """Ranks from 0 with ties at their average rank."""
    v = np.asarray(x, dtype=float)
    r = np.empty(len(v))
    r[np.argsort(v, kind="mergesort")] = np.arange(len(v))
    for u in np.unique(v):
        r[v == u] = r[v == u].mean()
    return r


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation.

    >>> spearman([1, 2, 3], [10, 30, 20])
    0.5
    """
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def _median(v: Any) -> float:
    return float(v["median"] if isinstance(v, dict) else v)


def table() -> dict[str, Any]:
    out: dict[str, Any] = {"source": "compute_to_target_<pool>.json (the first registration)", "pools": {}}
    for pool in POOLS:
        res = json.loads((RESULTS / f"compute_to_target_{pool}.json").read_text())
        summary = res["by_pool"][pool]
        comp, per_arm = summary["compute"], summary["table"]
        best = comp["axes"]["tokens"]["best_uniform"]
        arms = [a for a, row in comp["table"].items() if a not in ORACLES and row["tokens"]["value"] is not None]
        rows = {
            a: {
                "samples_per_step": _median(per_arm[a]["samples_per_step"]),
                "predicted": _median(per_arm[best]["samples_per_step"]) / _median(per_arm[a]["samples_per_step"]),
                "measured": comp["table"][a]["tokens"]["value"],
            }
            for a in arms
        }
        adaptive = [a for a in arms if a not in UNIFORM]
        out["pools"][pool] = {
            "best_uniform": best,
            "spearman_all": spearman([rows[a]["predicted"] for a in arms], [rows[a]["measured"] for a in arms]),
            "arms_all": len(arms),
            "spearman_adaptive": spearman(
                [rows[a]["predicted"] for a in adaptive], [rows[a]["measured"] for a in adaptive]
            ),
            "arms_adaptive": len(adaptive),
            "arms": rows,
        }
    return out


def main() -> int:
    t = table()
    print(f"{'pool':<8} {'best uniform':<13} {'rho (all)':>10} {'arms':>5} {'rho (adaptive)':>15} {'arms':>5}")
    for pool, p in t["pools"].items():
        print(
            f"{pool:<8} {p['best_uniform']:<13} {p['spearman_all']:10.2f} {p['arms_all']:5d} "
            f"{p['spearman_adaptive']:15.2f} {p['arms_adaptive']:5d}"
        )
    (RESULTS / "samples_per_step.json").write_text(json.dumps(t, indent=1) + "\n")
    print(f"wrote {RESULTS / 'samples_per_step.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
