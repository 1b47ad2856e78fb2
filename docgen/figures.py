"""The site's generated pictures (`python -m docgen`), each drawn from data, never by hand: the studies' (their
pages' `drawings`, e.g. every arm's tokens-to-target factor per pool) and one of its own, `allocator_rounds`:
Ada-Seq-balanced's rounds on a real `collect` run over the simulated policy, each prompt's samples round by round
(correct / wrong), where its exit rule retired it, and the n samples kept for training.

Each figure's numbers are also written beside it as JSON (`*.json`): the drift test compares those exactly, since a
PNG's bytes depend on the matplotlib and FreeType build.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def pyplot():
    """matplotlib's pyplot, headless and with the settings every generated figure shares."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "docgen", "font.size": 9})
    return plt


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
    plt = pyplot()
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


FIGURES = {"docs/img/allocator_rounds": (rounds_data, draw_rounds)}
"""Path without suffix -> (its data, its drawing): `.json` and `.png` are written."""


def write(root: Path, studies: dict[str, tuple[Callable[[], Any], Callable[[Any, Path], None]]]) -> list[Path]:
    """Draw the studies' figures (their pages' `drawings`) and `FIGURES` under `root`; the paths written."""
    out = []
    for stem, (data_fn, draw) in {**studies, **FIGURES}.items():
        data = data_fn()
        base = root / stem
        base.parent.mkdir(parents=True, exist_ok=True)
        base.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        draw(data, base.with_suffix(".png"))
        out += [base.with_suffix(".json"), base.with_suffix(".png")]
    return out
