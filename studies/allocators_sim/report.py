"""The simulation study's arms and its reading of their curves: targets, per-seed ratios against the reference, the
table and the figure (used by `run` and `regenerate`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

REFERENCE = "grpo-n4"
ARMS = {
    "grpo-n4": "uniform",
    "dapo": "dynamic",
    "seq-bal": "seq",
    "est": "est",
    "seq-giveup": "seq:give_up=0.1",
    "seq-giveup-both": "seq:give_up=0.1,estimator=both",
    "est-pred": "est:estimator=predictor",
    "est-knapsack-both": "est:allocation=knapsack,estimator=both",
    "knapsack": "knapsack",
    "knapsack-paper": "knapsack:min_samples=2,max_samples=128",
    "pilot-commit": "pilot_commit",
    "greso": "greso",
    "mopps": "mopps:decay=1",
    "seq+greso": "seq:select=greso",
    "seq+mopps": "seq:select=mopps,decay=1",
}
PROBE_ARMS = ["est-pred", "seq-giveup-both", "est-knapsack-both"]


def first_crossing(xs: np.ndarray, ys: np.ndarray, target: float) -> float:
    """x where y first reaches target, linearly interpolated; inf if never."""
    hit = np.flatnonzero(ys >= target)
    if not len(hit):
        return float("inf")
    i = int(hit[0])
    if i == 0:
        return float(xs[0])
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(x0 + (x1 - x0) * (target - y0) / (y1 - y0))


def at_samples(samples: np.ndarray, ys: np.ndarray, budget: float) -> float:
    """Pass rate once `budget` samples are spent (interpolated); nan if the run spent less."""
    return float(np.interp(budget, samples, ys)) if samples[-1] >= budget else float("nan")


def med_range(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=float)
    return {"median": float(np.median(a)), "lo": float(np.min(a)), "hi": float(np.max(a))}


def summarise(runs: dict[str, list[dict]], target: float, budget: float, ref: list[dict] | None) -> dict[str, dict]:
    out = {}
    for name, seeds in runs.items():
        per = []
        for i, c in enumerate(seeds):
            pr, sm = np.array(c["pass_rate"]), np.array(c["samples"])
            steps = np.arange(len(pr), dtype=float)
            row = {
                "final_pass_rate": float(pr[-1]),
                "steps_to_target": first_crossing(steps, pr, target),
                "samples_to_target": first_crossing(sm, pr, target),
                "pass_rate_at_budget": at_samples(sm, pr, budget),
                "samples_per_step": float(np.mean(c["samples_per_step"])),
                "no_signal_share": float(np.mean(c["zero_signal"])),
                "skipped_per_step": float(np.mean(c["skipped_per_step"])),
            }
            if ref is not None:  # paired with the reference arm's run on the same seed
                rp, rs = np.array(ref[i]["pass_rate"]), np.array(ref[i]["samples"])
                ref_steps = first_crossing(np.arange(len(rp), dtype=float), rp, target)
                row["samples_to_target_vs_ref"] = row["samples_to_target"] / first_crossing(rs, rp, target)
                row["steps_to_target_vs_ref"] = row["steps_to_target"] / ref_steps
            per.append(row)
        out[name] = {"per_seed": per, **{k: med_range([r[k] for r in per]) for k in per[0]}}
    return out


def table(title: str, summary: dict[str, dict], arms: dict[str, str]) -> str:
    def f(d: dict, fmt: str) -> str:
        m, lo, hi = d["median"], d["lo"], d["hi"]
        if not np.isfinite(m):
            return "not reached"
        return f"{m:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]".replace("inf", "∞")

    head = (
        f"{'arm':<19} {'spec':<40} {'final pass':>22} {'samples to target ÷ ref':>24} {'steps to target ÷ ref':>22} "
        f"{'pass @ ref budget':>22} {'samples/step':>13} {'no-signal':>10} {'skipped/step':>12}"
    )
    lines = [title, head, "-" * len(head)]
    for name, s in summary.items():
        lines.append(
            f"{name:<19} {arms[name]:<40} {f(s['final_pass_rate'], '.3f'):>22} "
            f"{f(s['samples_to_target_vs_ref'], '.2f'):>24} {f(s['steps_to_target_vs_ref'], '.2f'):>22} "
            f"{f(s['pass_rate_at_budget'], '.3f'):>22} {s['samples_per_step']['median']:>13.0f} "
            f"{s['no_signal_share']['median']:>10.3f} {s['skipped_per_step']['median']:>12.1f}"
        )
    return "\n".join(lines)


def plot(runs: dict[str, list[dict]], target: float, budget: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(18, 5.2))
    cmap = plt.get_cmap("tab20")
    for k, (name, seeds) in enumerate(runs.items()):
        color = cmap(k % 20)
        pr = np.array([c["pass_rate"] for c in seeds])
        sm = np.median(np.array([c["samples"] for c in seeds]), 0)
        style = "-" if k < 10 else "--"
        ax[0].plot(np.median(pr, 0), style, color=color, label=name, lw=1.4)
        ax[1].plot(sm / 1000, np.median(pr, 0), style, color=color, lw=1.4)
        zs = np.median(np.array([c["zero_signal"] for c in seeds]), 0)
        ax[2].plot(np.convolve(zs, np.ones(10) / 10, mode="valid"), style, color=color, lw=1.2)
    for a in ax[:2]:
        a.axhline(target, color="grey", lw=0.8, ls=":")
    ax[1].axvline(budget / 1000, color="grey", lw=0.8, ls=":")
    ax[0].set(xlabel="step", ylabel="mean pass rate (pool)", title="pass rate per step (median over seeds)")
    ax[1].set(xlabel="samples generated (thousands)", ylabel="mean pass rate (pool)", title="pass rate per sample")
    ax[1].set_xlim(0, 3 * budget / 1000)
    ax[2].set(xlabel="step", ylabel="share of sampled prompts", title="no-signal share (10-step mean)", ylim=(0, 1))
    ax[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rounded(x):
    if isinstance(x, float):
        return round(x, 5) if np.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x
