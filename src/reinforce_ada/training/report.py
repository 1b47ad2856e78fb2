"""`report.png` for a run: reward and held-out accuracy, zero-advantage share, samples per step, accuracy per level."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from reinforce_ada.training.run_dir import write_file
from reinforce_ada.training.tracking import read_metrics


def smooth(x: np.ndarray, k: int = 10) -> np.ndarray:
    if len(x) < k:
        return x
    return np.convolve(x, np.ones(k) / k, mode="valid")


def summary_lines(rows: list[dict]) -> list[str]:
    """The terminal's last words on a run: held-out accuracy at the first and last evaluation (overall and per
    level), and what the sampling cost. Empty when the run logged nothing."""
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval_accuracy" in r]
    lines = []
    if evals:
        first, last = evals[0], evals[-1]
        k = first.get("eval_samples")
        ave = f"Ave@{k}" if k else "Ave@k"
        a, b = first["eval_accuracy"], last["eval_accuracy"]
        lines.append(
            f"held-out accuracy ({ave}): {a:.3f} at step {first['step']} -> {b:.3f} at step {last['step']} "
            f"({b - a:+.3f})"
        )
        levels = sorted((k for k in last if k.startswith("eval_accuracy_L")), key=lambda k: k[15:].zfill(4))
        if levels:
            per = "  ".join(f"{k[14:]} {first.get(k, float('nan')):.2f}->{last[k]:.2f}" for k in levels)
            lines.append(f"per level: {per}")
    if train and any("worker_busy_imbalance" in r for r in train):
        imb = np.nanmedian([r.get("worker_busy_imbalance", np.nan) for r in train])
        restarts = sum(r.get("worker_restarts", 0) or 0 for r in train)
        lines.append(f"rollout workers: median busy-time imbalance (max/mean) {imb:.2f}, {restarts} restarts")
    if train:
        gen = np.mean([r["samples_generated"] for r in train])
        zero = np.mean([r["zero_adv_prompt_share"] for r in train])
        secs = sum(r.get("time_step_s", 0.0) for r in train)
        lines.append(
            f"{len(train)} steps: {gen:.0f} samples generated per step, zero-advantage share {zero:.3f}, "
            f"{secs:.{1 if secs < 10 else 0}f} s in steps"
        )
    return lines


def make_report(run_dir: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    train = [r for r in rows if r.get("reward_first_round") is not None and "loss" in r]
    evals = [r for r in rows if "eval_accuracy" in r]
    workers = sorted(
        {k for r in train for k in r if k.startswith("worker") and k.endswith("_busy_s") and k[6:-7].isdigit()},
        key=lambda k: int(k[6:-7]),
    )
    fig, ax = plt.subplots(1, 5 if workers else 4, figsize=(24 if workers else 19, 4.2))
    if train:
        s = np.array([r["step"] for r in train])
        rew = np.array([r["reward_first_round"] for r in train], dtype=float)
        ax[0].plot(s, rew, alpha=0.25, color="C0")
        ax[0].plot(s[len(s) - len(smooth(rew)) :], smooth(rew), color="C0", label="first-round reward (train)")
        # the two shares coincide whenever nothing is dropped: draw the no-signal line wide and faint underneath and
        # the zero-advantage line thin and dashed on top, so both stay visible
        ax[1].plot(
            s,
            [r.get("no_signal_prompt_share", np.nan) for r in train],
            color="C1",
            lw=3.5,
            alpha=0.45,
            label="no-signal share (all prompts sampled)",
            zorder=2,
        )
        ax[1].plot(
            s,
            [r["zero_adv_prompt_share"] for r in train],
            color="C0",
            lw=1.2,
            ls="--",
            label="zero-advantage share (trained prompts)",
            zorder=3,
        )
        ax[2].plot(s, [r["samples_generated"] for r in train], label="generated")
        ax[2].plot(s, [r["samples_trained"] for r in train], label="trained")
    if workers:  # Ray rollout workers: busy time per worker and step, so imbalance and restarts are visible
        for k in workers:
            ax[4].plot(s, [r.get(k, np.nan) for r in train], lw=1, label=k.removesuffix("_busy_s"))
        restarts = sum(r.get("worker_restarts", 0) or 0 for r in train)
        imbalance = np.nanmedian([r.get("worker_busy_imbalance", np.nan) for r in train])
        ax[4].set(
            xlabel="step",
            ylabel="busy s",
            title=f"rollout workers (median max/mean busy {imbalance:.2f}, {restarts} restarts)",
        )
        ax[4].legend(fontsize=7)
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
    per_level = bool(evals) and any(k.startswith("eval_accuracy_L") for r in evals for k in r)
    if not per_level and train:  # no difficulty levels (a file task): what the completions look like instead
        ax[3].plot(
            s,
            [r.get("tokens_generated", np.nan) / max(r.get("samples_generated") or 1, 1) for r in train],
            color="C4",
            label="tokens per sample",
        )
        ax3b = ax[3].twinx()
        ax3b.plot(
            s,
            [r.get("completions_clipped_share", np.nan) for r in train],
            color="C5",
            ls="--",
            label="cut at max_new_tokens",
        )
        ax3b.set(ylabel="share cut", ylim=(0, 1.02))
        ax3b.legend(fontsize=7, loc="lower right")
    ax[0].set(xlabel="step", ylabel="reward / accuracy", title=title or "reward and held-out accuracy")
    ax[1].set(xlabel="step", ylabel="share", ylim=(0, 1), title="prompts without signal")
    ax[2].set(xlabel="step", ylabel="samples", title="samples per step")
    if per_level or not train:
        ax[3].set(xlabel="step", ylabel="accuracy", ylim=(0, 1.02), title="held-out accuracy per level")
    else:
        ax[3].set(xlabel="step", ylabel="tokens", title="completion length (no levels in this task)")
    for a in ax[:3]:
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    if not per_level and ax[3].get_legend_handles_labels()[0]:
        ax[3].legend(fontsize=7, loc="upper left")
    elif ax[3].get_legend_handles_labels()[0]:  # one entry per level: outside the axes, never over the curves
        ax[3].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="level")
    fig.tight_layout()
    out = Path(run_dir) / "report.png"
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100, bbox_inches="tight")  # keeps the per-level legend outside the axes
    plt.close(fig)
    write_file(out, png.getvalue())  # as every file of the run: O_NOFOLLOW, atomic rename
    return out
