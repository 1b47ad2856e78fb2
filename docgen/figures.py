"""The site's two generated pictures (`python -m docgen`), each drawn from data, never by hand.

1) `compute_to_target_tokens`: every arm's tokens-to-target factor against the best uniform GRPO, per pool, with its
   90% t-interval (the compute-to-target study's result JSONs), the plot a practitioner reads before choosing.
2) `allocator_rounds`: Ada-Seq-balanced's rounds on a real `collect` run over the simulated policy: each prompt's
   samples round by round (correct / wrong), where its exit rule retired it, and the n samples kept for training.

Each figure's numbers are also written beside it as JSON (`*.json`): the drift test compares those exactly, since a
PNG's bytes depend on the matplotlib and FreeType build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docgen.results import POOLS, pool_table

UNIFORM_COLOR, ADAPTIVE_COLOR, SEQ_COLOR, ORACLE_COLOR = "#7f7f7f", "#1f77b4", "#d62728", "#ff7f0e"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "docgen", "font.size": 9})
    return plt


def tokens_data() -> dict[str, Any]:
    """Per pool: the reference arm and every arm's tokens factor with its t-interval."""
    out: dict[str, Any] = {}
    for pool in POOLS:
        t = pool_table(pool)
        if not t:
            continue
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
    plt = _plt()
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
    fig.suptitle("Does adaptive sampling pay per generated token? (grey: uniform GRPO, blue: adaptive, red: Ada-Seq, "
                 "orange: oracle, a ceiling)")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def rounds_data() -> dict[str, Any]:
    """One step of Ada-Seq-balanced (M=8, N_max=32, n=4) on six simulated prompts of chosen pass rates."""
    from reinforce_ada import SimConfig, SimulatedPolicy, build_strategy, collect, strategy_config
    from reinforce_ada.types import Prompt

    rates = [0.9, 0.5, 0.25, 0.1, 0.03, 0.0]
    prompts = [Prompt(id=f"p={r}", text=f"p={r}") for r in rates]
    engine = SimulatedPolicy(prompts, [max(r, 1e-6) for r in rates], SimConfig(seed=3))
    cfg = strategy_config("seq", exit="balanced", seed=3)
    batch = collect(build_strategy(cfg), engine, prompts)
    m = cfg.options.samples_per_round
    rows = []
    for g in batch.groups:
        rewards = [int(r > cfg.options.threshold) for r in g.pool_rewards]
        kept = sorted((s.round, int((s.reward or 0) > cfg.options.threshold)) for s in g.samples)
        rows.append({"prompt": g.prompt.id, "rewards": rewards, "kept": kept, "resolved": g.resolved, "per_round": m})
    return {"strategy": "seq:exit=balanced (M=8, N_max=32, n=4, k_pos=k_neg=2)", "rows": rows}


def draw_rounds(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    from matplotlib.patches import Rectangle

    rows = data["rows"]
    m = rows[0]["per_round"]
    fig, ax = plt.subplots(figsize=(10.5, 0.55 * len(rows) + 1.6))
    for y, row in enumerate(rows):
        left = list(row["kept"])
        for i, r in enumerate(row["rewards"]):
            rnd = i // m
            x = i + rnd * 1.5  # a gap between rounds
            kept = (rnd, r) in left
            if kept:
                left.remove((rnd, r))
            ax.add_patch(
                Rectangle((x, y - 0.3), 0.9, 0.6, color="#2ca02c" if r else "#d62728", alpha=1 if kept else 0.35)
            )
            if kept:
                ax.add_patch(Rectangle((x - 0.08, y - 0.38), 1.06, 0.76, fill=False, lw=1.6, color="black"))
        n = len(row["rewards"])
        end = n + (n - 1) // m * 1.5
        label = "retired: exit rule met" if row["resolved"] else "cap reached, unresolved"
        ax.text(end + 0.6, y, f"{label} ({n} samples)", va="center", fontsize=8)
    for r in range(4):
        ax.text(r * (m + 1.5) + m / 2 - 0.5, -0.9, f"round {r + 1}", ha="center", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["prompt"] for r in rows])
    ax.set_xlim(-0.5, 4 * (m + 1.5) + 14)
    ax.set_ylim(len(rows) - 0.4, -1.4)
    ax.set_xticks([])
    for s in ("top", "right", "bottom"):
        ax.spines[s].set_visible(False)
    ax.set_title(
        f"Ada-Seq-balanced, one step on the simulated policy: {data['strategy']}\n"
        "green: correct, red: wrong; outlined: the n kept for training (balanced where possible); "
        "the baseline is the mean over every sample drawn",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


FIGURES = {
    "docs/results/img/compute_to_target_tokens": (tokens_data, draw_tokens),
    "docs/img/allocator_rounds": (rounds_data, draw_rounds),
}
"""Path without suffix -> (its data, its drawing): `.json` and `.png` are written."""


def write(root: Path) -> list[Path]:
    out = []
    for stem, (data_fn, draw) in FIGURES.items():
        data = data_fn()
        base = root / stem
        base.parent.mkdir(parents=True, exist_ok=True)
        base.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        draw(data, base.with_suffix(".png"))
        out += [base.with_suffix(".json"), base.with_suffix(".png")]
    return out
