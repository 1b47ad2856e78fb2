"""The plan for Ray rollout workers at scale, in numbers from the project's latency model (`simulation.makespan`).

    python -m benchmarks.ray_plan          # -> benchmarks/results/ray_plan.json (docs/ray.md quotes it)

1) Generation: `makespan_study` on the hard pool (GRPO-n4 and Ada-Seq-balanced, round and streaming drivers) with
   `slots` = GPUs x slots per GPU: one simulated engine with a single queue over every GPU's slots. That is the best
   a pool of workers can do (our pool's static round-robin chunks can only add imbalance), so the speed-ups below
   are upper bounds for the sampling phase.
2) A step = generation makespan + learner time + weight publication. The learner is sized so that generation is
   70% of a 1-GPU step (the issue's figure); it is data-parallel over the same GPUs (time / GPUs) or stays on one
   GPU (`learner_gpus = 1`). Publishing the weights: a 1.5B-parameter model in bf16 (3 GB) copied once to each
   node's object store: 0 s inside one node (shared memory), 3 GB / bandwidth across nodes (100 and 25 Gbit/s).
3) Weak scaling: the same with prompts per step = 256 x GPUs (each GPU keeps the 1-GPU load); the speed-up is in
   samples generated per unit of generation time (samples per step vary with the strategy's draws).
4) Times are in the latency model's seconds (1 s = one mean-length sample on one slot), so only ratios carry over.
"""

from __future__ import annotations

import datetime
import json
import shlex
import sys
from pathlib import Path

from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.simulation.makespan import makespan_study
from reinforce_ada.simulation.stream import Latency

RESULTS = Path(__file__).resolve().parent / "results"
SLOTS_PER_GPU = 64
PROMPTS = 256
GPUS = (1, 8, 16)
"""1 GPU; one node of 8; two nodes of 8."""
WEIGHTS_GB = 3.0
"""Qwen2.5-Math-1.5B in bf16."""


def main() -> int:
    arms = {
        "grpo-n4": (strategy_config(name="uniform", n=4), {}),
        "seq-balanced": (strategy_config(name="seq"), {}),
    }
    latency = Latency(sigma=1.0)
    gen = {
        g: makespan_study(arms, prompts_per_step=PROMPTS, slots=g * SLOTS_PER_GPU, steps=8, latency=latency)
        for g in GPUS
    }
    rows = []
    for arm_mode in gen[1]:
        one = gen[1][arm_mode]["makespan"]
        learner = one * 0.3 / 0.7
        for g in GPUS:
            span = gen[g][arm_mode]["makespan"]
            nodes = 1 if g <= 8 else g // 8
            for gbit in (100, 25):
                sync = 0.0 if nodes == 1 else WEIGHTS_GB * 8 / gbit  # real seconds; the model's second ~ a sample
                rows.append(
                    {
                        "arm": arm_mode,
                        "gpus": g,
                        "nodes": nodes,
                        "network_gbit": gbit,
                        "generation_makespan": span,
                        "generation_speedup": one / span,
                        "utilisation": gen[g][arm_mode]["utilisation"],
                        "step_speedup_learner_dp": (one + learner) / (span + learner / g + sync),
                        "step_speedup_learner_1gpu": (one + learner) / (span + learner + sync),
                        "weight_sync_s": sync,
                    }
                )
    # weak scaling: prompts per step grow with the GPUs (the way to use them: the per-GPU load stays 256 prompts)
    weak = {
        g: makespan_study(arms, prompts_per_step=PROMPTS * g, slots=g * SLOTS_PER_GPU, steps=4, latency=latency)
        for g in GPUS
    }
    weak_rows = [
        {
            "arm": a,
            "gpus": g,
            "prompts_per_step": PROMPTS * g,
            "generation_makespan": weak[g][a]["makespan"],
            "samples": weak[g][a]["samples"],
            "throughput_speedup": (weak[g][a]["samples"] / weak[g][a]["makespan"])
            / (weak[1][a]["samples"] / weak[1][a]["makespan"]),
            "utilisation": weak[g][a]["utilisation"],
        }
        for a in weak[1]
        for g in GPUS
    ]
    for r in weak_rows:
        print(
            f"weak {r['arm']:20s} {r['gpus']:3d} GPU {r['prompts_per_step']:5d} prompts  "
            f"gen {r['generation_makespan']:7.2f}  throughput x{r['throughput_speedup']:.2f}  "
            f"util {r['utilisation']:.2f}"
        )
    out = {
        "command": "python -m benchmarks.ray_plan " + shlex.join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "prompts_per_step": PROMPTS,
        "slots_per_gpu": SLOTS_PER_GPU,
        "latency": {"mean_tokens": latency.mean_tokens, "sigma": latency.sigma, "token_time": latency.token_time},
        "rows": rows,
        "weak_scaling": weak_rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ray_plan.json").write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        if r["network_gbit"] == 100 or r["nodes"] > 1:
            print(
                f"{r['arm']:20s} {r['gpus']:3d} GPU {r['nodes']} node {r['network_gbit']:3d} Gb/s  "
                f"gen {r['generation_makespan']:7.2f} (x{r['generation_speedup']:.2f}, util {r['utilisation']:.2f})  "
                f"step x{r['step_speedup_learner_dp']:.2f} (DP learner) x{r['step_speedup_learner_1gpu']:.2f} (1-GPU)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
