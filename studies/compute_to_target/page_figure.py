"""The compute-to-target figure of the results overview (`python -m docgen` draws it): every arm's tokens-to-target
factor against the best uniform GRPO, per pool, with its 90% t-interval, the plot a practitioner reads before
choosing; its numbers are written beside it as JSON (`docgen.figures`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docgen.figures import pyplot

UNIFORM_COLOR, ADAPTIVE_COLOR, SEQ_COLOR, ORACLE_COLOR = "#7f7f7f", "#1f77b4", "#d62728", "#ff7f0e"


def tokens_data(tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per pool (`tables`: each pool's `compute` summary): the reference arm and every arm's tokens factor with its
    t-interval."""
    out: dict[str, Any] = {}
    for pool, t in tables.items():
        arms = {}
        for arm, row in t["table"].items():
            tok = row.get("tokens") or {}
            if tok.get("value") is not None:
                arms[arm] = [
                    round(tok["value"], 4),
                    round(tok.get("t_lo", tok["value"]), 4),
                    round(tok.get("t_hi", tok["value"]), 4),
                ]
        out[pool] = {"reference": t["axes"]["tokens"]["best_uniform"], "arms": arms}
    return out


def _color(arm: str) -> str:
    if arm.startswith("grpo"):  # GRPO-n and budget-matched GRPO: uniform
        return UNIFORM_COLOR
    if arm.startswith("oracle"):
        return ORACLE_COLOR
    if arm.startswith("seq"):
        return SEQ_COLOR
    return ADAPTIVE_COLOR


def draw_tokens(data: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    from matplotlib.ticker import NullLocator

    pools = list(data)
    arms = list(dict.fromkeys(a for p in pools for a in data[p]["arms"]))
    fig, axes = plt.subplots(1, len(pools), figsize=(2.6 * len(pools) + 1.2, 0.26 * len(arms) + 1.4), sharey=True)
    for ax, pool in zip(axes, pools, strict=True):
        for y, arm in enumerate(arms):
            if arm not in data[pool]["arms"]:
                continue
            v, lo, hi = data[pool]["arms"][arm]
            c = _color(arm)
            ax.plot([lo, hi], [y, y], color=c, lw=1.6)
            ax.plot([v], [y], "o", color=c, ms=4)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks([0.2, 0.5, 1, 2])
        ax.set_xticklabels(["0.2", "0.5", "1", "2"])
        ax.set_xlim(0.1, 3.2)
        ax.set_title(f"{pool} (vs {data[pool]['reference']})")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(arms)))
    axes[0].set_yticklabels(arms)
    axes[0].invert_yaxis()
    fig.supxlabel("tokens to target: best uniform GRPO / arm (> 1: fewer tokens), 90% interval, 9 seeds")
    fig.suptitle(
        "Does adaptive sampling pay per generated token? (grey: uniform GRPO, blue: adaptive, red: Ada-Seq, "
        "orange: oracle, a ceiling)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
