"""`report.png` for a run: reward and held-out accuracy, zero-advantage share, samples per step, accuracy per level."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reinforce_ada.training.tracking import read_metrics


def smooth(x: np.ndarray, k: int = 10) -> np.ndarray:
    if len(x) < k:
        return x
    return np.convolve(x, np.ones(k) / k, mode="valid")


def make_report(run_dir: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    train = [r for r in rows if r.get("reward_first_round") is not None and "loss" in r]
    evals = [r for r in rows if "eval_accuracy" in r]
    fig, ax = plt.subplots(1, 4, figsize=(19, 4.2))
    if train:
        s = np.array([r["step"] for r in train])
        rew = np.array([r["reward_first_round"] for r in train], dtype=float)
        ax[0].plot(s, rew, alpha=0.25, color="C0")
        ax[0].plot(s[len(s) - len(smooth(rew)) :], smooth(rew), color="C0", label="first-round reward (train)")
        ax[1].plot(s, [r["zero_adv_prompt_share"] for r in train], label="zero-advantage share (trained prompts)")
        ax[1].plot(s, [r.get("no_signal_prompt_share", np.nan) for r in train], label="no-signal share (all)")
        ax[2].plot(s, [r["samples_generated"] for r in train], label="generated")
        ax[2].plot(s, [r["samples_trained"] for r in train], label="trained")
    if evals:
        ax[0].plot(
            [r["step"] for r in evals],
            [r["eval_accuracy"] for r in evals],
            "o-",
            color="C3",
            label="held-out accuracy (Ave@k)",
        )
        levels = sorted({k for r in evals for k in r if k.startswith("eval_accuracy_L")}, key=lambda k: int(k[15:]))
        for k in levels:
            ax[3].plot(
                [r["step"] for r in evals], [r.get(k) for r in evals], "o-", label=k.replace("eval_accuracy_", "")
            )
    ax[0].set(xlabel="step", ylabel="reward / accuracy", title=title or "reward and held-out accuracy")
    ax[1].set(xlabel="step", ylabel="share", ylim=(0, 1), title="prompts without signal")
    ax[2].set(xlabel="step", ylabel="samples", title="samples per step")
    ax[3].set(xlabel="step", ylabel="accuracy", ylim=(0, 1.02), title="held-out accuracy per level")
    for a in ax:
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    fig.tight_layout()
    out = Path(run_dir) / "report.png"
    tmp = out.with_name(".report.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out)
    return out
