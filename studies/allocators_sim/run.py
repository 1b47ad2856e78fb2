"""Every adaptive allocator side by side on the simulated policy: per step and per sample.

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

    nice -n 10 python -m studies.allocators_sim.run                      # ~5-10 min on 2 cores; writes results/
    python -m studies.allocators_sim.run --steps 20 --seeds 2 --out /tmp/a   # smoke
    python -m studies.allocators_sim.regenerate                          # the committed results from the records

Every run's curve goes to the study's records (`results/records.jsonl.gz`, one line per arm and seed); the JSON
(summaries, no curves) and the PNG are written from them by `regenerate.write_sim`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.simulation.policy import SimConfig, hard_pool
from reinforce_ada.simulation.simulate import run_arm
from studies.allocators_sim.report import ARMS, PROBE_ARMS, REFERENCE

RESULTS = Path(__file__).resolve().parent / "results"


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
    result = {
        "command": "python -m studies.allocators_sim.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "settings": {**vars(args), "sim": {"lr": args.sim_lr}, "reference": REFERENCE},
        "pool": {
            "size": args.pool_size,
            "seed": args.pool_seed,
            "mean_pass_rate": float(hard_pool(args.pool_size, args.pool_seed)[1].mean()),
        },
    }
    blocks = {"main": runs}
    if not args.no_probe:
        probe = {name: ARMS[name] for name in PROBE_ARMS}
        print(f"\nprobe block: {len(probe)} arms with features=probe", flush=True)
        blocks["probe"] = run_block(probe, args, "probe")
    result["wall_s"] = time.time() - t0  # the simulation's, not the report's
    out = Path(args.out)
    lines = [
        {"id": f"{b}/{name}/seed{i}", "block": b, "arm": name, "seed": i, **c}
        for b, rs in blocks.items()
        for name, seeds in rs.items()
        for i, c in enumerate(seeds)
    ]
    ctx = {"name": out.name, "meta": result, "runs": {b: [x["id"] for x in lines if x["block"] == b] for b in blocks}}
    from studies.allocators_sim.regenerate import write_sim
    from studies.protocol import records

    records.update(out.parent / "records.jsonl.gz", ctx, lines)
    write_sim(ctx, {x["id"]: x for x in lines}, out.parent)
    print(
        f"wrote {out.parent / 'records.jsonl.gz'}, {out.with_suffix('.json')} and {out.with_suffix('.png')} "
        f"({result['wall_s']:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
