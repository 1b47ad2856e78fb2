"""The belief-quality study's beliefs and its reading of the replays: t-intervals, the printed rows and the figure
(used by `run` and `regenerate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.bench.curves import T_95

BELIEFS = (
    "oracle",
    "level-oracle",
    "text+level",
    "level",
    "text+level+hidden",
    "hidden",
    "text+level+confidence",
    "confidence",
    "text+level s=32",
)


def t_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and 90% t-interval (arithmetic: shares and correlations may be 0 or negative)."""
    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, float("nan"), float("nan")
    t = T_95[len(x) - 2] if len(x) - 1 <= len(T_95) else 1.645
    h = float(t * x.std(ddof=1) / np.sqrt(len(x)))
    return m, m - h, m + h


def _fmt(ci: tuple[float, float, float]) -> str:
    return f"{ci[0]:6.3f} [{ci[1]:6.3f},{ci[2]:6.3f}]"


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pools = list(results["pools"])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    labels = ["uniform", *BELIEFS]
    width = 0.8 / len(pools)
    for j, pool in enumerate(pools):
        bel = results["pools"][pool]["beliefs"]
        m = [bel[b]["signal"][0] for b in labels]
        lo = [bel[b]["signal"][0] - bel[b]["signal"][1] for b in labels]
        hi = [bel[b]["signal"][2] - bel[b]["signal"][0] for b in labels]
        ax.bar(np.arange(len(labels)) + j * width, m, width, yerr=[lo, hi], label=pool)
    ax.set_xticks(np.arange(len(labels)) + width * (len(pools) - 1) / 2, labels, rotation=20, fontsize=8)
    ax.set_ylabel("admitted prompts' P(signal), n=4")
    ax.set_title(f"signal-draw's admission by belief, warm start held fixed ({results['date']})", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
