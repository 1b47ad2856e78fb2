"""The real-model study's figure: accuracy against tokens, steps and CPU seconds, one line per arm with a
min-max band over seeds, each arm's median tokens to every registered target, samples per step and no-signal share."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(res: dict[str, Any], path: Path) -> None:
    """Accuracy vs tokens (mean over seeds with a min-max band), vs steps and vs CPU seconds; tokens to target;
    samples per step and no-signal share per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from reinforce_ada.bench.compute import _curve

    main = [r for r in res["runs"] if r["phase"] == "main"]
    ran = {r["arm"] for r in main}
    arms = [a for a in res["instrument"]["arms"] if a in ran] + sorted(ran - set(res["instrument"]["arms"]))
    fig, ax = plt.subplots(2, 3, figsize=(17, 8))
    for i, arm in enumerate(arms):
        runs = [r for r in main if r["arm"] == arm]
        for a_, axis in ((ax[0, 0], "tokens"), (ax[0, 1], "steps"), (ax[1, 0], "cpu_s")):
            curves = [_curve(r, axis) for r in runs]
            grid = np.linspace(0, min(c[0][-1] for c in curves), 50)
            ys = np.array([np.interp(grid, x, y) for x, y in curves])
            a_.plot(grid, ys.mean(0), f"C{i}", label=f"{arm} ({len(runs)} seeds)")
            a_.fill_between(grid, ys.min(0), ys.max(0), color=f"C{i}", alpha=0.2)
    a = res["analysis"]
    for lv in a["target_levels"]:
        ax[0, 0].axhline(lv, color="0.85", lw=0.6, zorder=0)
    width = 0.8 / max(1, len(arms))
    fr = a["target_fractions"]
    for i, arm in enumerate(arms):
        med = [a["table"][arm]["tokens_to_target"][f"{f:g}"]["median"] for f in fr]
        ax[1, 1].bar(np.arange(len(fr)) + i * width, [m if m is not None else 0 for m in med], width, color=f"C{i}")
    ax[1, 1].set_xticks(np.arange(len(fr)) + 0.4 - width / 2, [f"{f:g}" for f in fr])
    t = a["table"]
    x = np.arange(len(arms))
    for j, (key, name) in enumerate((("samples_per_step", "samples per step"), ("no_signal_share", "no-signal share"))):
        ax[j, 2].bar(x, [t[arm][key] for arm in arms], color=[f"C{i}" for i in range(len(arms))])
        ax[j, 2].set_xticks(x, arms, fontsize=8)
        ax[j, 2].set(ylabel=name + " (mean over steps and seeds)", title=name)
    label = f"held-out accuracy ({res['instrument']['eval']}, {res['instrument']['eval_prompts']} prompts)"
    ax[0, 0].set(xlabel="generated tokens", ylabel=label, title="accuracy vs tokens (band: min-max over seeds)")
    ax[0, 1].set(xlabel="RL step", ylabel=label, title="accuracy vs steps")
    ax[1, 0].set(xlabel="CPU seconds in training steps", ylabel=label, title="accuracy vs wall-clock")
    ax[1, 1].set(
        xlabel="target (fraction of GRPO-n4's gain)",
        ylabel="median tokens to target (0 = missed)",
        title="tokens to target",
    )
    ax[0, 0].legend(fontsize=8)
    kind = "SMOKE RUN (not a result)" if res.get("smoke") else "registered study"
    title = f"{Path(res['model']).name}: {kind}" + (" — PARTIAL: " + res["partial"][:80] if res["partial"] else "")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
