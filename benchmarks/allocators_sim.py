"""Every adaptive allocator side by side on the simulated policy (issue 16): per step and per sample.

The simulated policy (`simulation.policy`) on `hard_pool` -- the default pool of `reinforce-ada simulate`, not tuned
for any arm -- with its default learning rate; every arm sees the same pool, and for each seed the same prompt order
and policy initialisation (paired seeds). Arms run interleaved, seed by seed. Arm specs are fixed in advance: each
method at its paper's defaults as far as our shared fields allow (docs/allocators.md), plus the compositions.
Reported per arm, median over seeds with the seed range (5 seeds: the range covers the median with ~94%):
- final pass rate (true mean over the pool, no eval noise) after `--steps`;
- steps and samples to reach the target: the reference arm's (GRPO-n4) median pass rate at step `--target-step`;
- pass rate at equal samples: at the samples the reference arm draws in `--steps` steps;
- samples per step, no-signal share of sampled prompts, prompts skipped per step (selection arms);
- per-seed paired ratios against the reference (samples to target, steps to target).
A second block reruns the predictor arms with `features=probe` (the prompt's hidden state assumed to carry a noisy
reading of its difficulty; an assumption, reported separately, not the main result).

    nice -n 10 python -m benchmarks.allocators_sim                       # ~10 min on 2 cores; writes results/
    python -m benchmarks.allocators_sim --steps 20 --seeds 2 --out /tmp/a   # smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.simulation.policy import SimConfig, hard_pool
from reinforce_ada.simulation.simulate import run_arm

RESULTS = Path(__file__).parent / "results"
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


def run_block(arms: dict[str, str], args: argparse.Namespace, features: str) -> dict[str, list[dict]]:
    prompts, rates = hard_pool(args.pool_size, args.pool_seed)
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    sim = SimConfig(lr=args.sim_lr)
    for seed in range(args.seeds):
        for name, spec in arms.items():  # interleaved: every arm on this seed before the next seed
            t0 = time.perf_counter()
            curve = run_arm(
                parse_arm(spec),
                prompts,
                rates,
                steps=args.steps,
                batch_size=args.batch_size,
                seed=seed,
                sim=sim,
                features=features,
            )
            curve["wall_s"] = time.perf_counter() - t0  # type: ignore[assignment]
            runs[name].append(curve)
            print(f"  seed {seed} {name:<20} final {curve['pass_rate'][-1]:.4f}  ({curve['wall_s']:.1f} s)", flush=True)
    return runs


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pool-size", type=int, default=2000)
    p.add_argument("--pool-seed", type=int, default=0)
    p.add_argument("--sim-lr", type=float, default=0.3)
    p.add_argument("--target-step", type=int, default=100, help="the target is the reference's pass rate here")
    p.add_argument("--no-probe", action="store_true", help="skip the features=probe block")
    p.add_argument("--out", default=str(RESULTS / "allocators_sim"))
    args = p.parse_args(argv)
    if not 0 < args.target_step <= args.steps:
        p.error(f"--target-step must be in [1, --steps={args.steps}]")
    t0 = time.time()
    print(f"main block: {len(ARMS)} arms x {args.seeds} seeds x {args.steps} steps", flush=True)
    runs = run_block(ARMS, args, "none")
    ref = runs[REFERENCE]
    target = float(np.median([c["pass_rate"][args.target_step] for c in ref]))
    budget = float(np.median([c["samples"][-1] for c in ref]))
    summary = summarise(runs, target, budget, ref)
    print(
        table(
            f"\ntarget pass rate {target:.4f} (grpo-n4 at step {args.target_step}); ref budget {budget:.0f}",
            summary,
            ARMS,
        )
    )
    result = {
        "command": "python -m benchmarks.allocators_sim " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "settings": {**vars(args), "sim": {"lr": args.sim_lr}, "reference": REFERENCE},
        "pool": {
            "size": args.pool_size,
            "seed": args.pool_seed,
            "mean_pass_rate": float(hard_pool(args.pool_size, args.pool_seed)[1].mean()),
        },
        "target_pass_rate": target,
        "reference_budget_samples": budget,
        "arms": {name: {"spec": ARMS[name], "summary": summary[name]} for name in ARMS},
        "curves": {name: {k: [c[k] for c in seeds] for k in ("pass_rate", "samples")} for name, seeds in runs.items()},
    }
    if not args.no_probe:
        probe = {name: ARMS[name] for name in PROBE_ARMS}
        print(f"\nprobe block: {len(probe)} arms with features=probe", flush=True)
        pruns = run_block(probe, args, "probe")
        psum = summarise(pruns, target, budget, ref)
        print(table("\nfeatures=probe (hidden state assumed to carry a noisy difficulty reading)", psum, probe))
        result["probe"] = {name: {"spec": probe[name], "summary": psum[name]} for name in probe}
    result["wall_s"] = time.time() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rounded(result), indent=1))
    plot(runs, target, budget, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
