"""P4: wall-clock per step of Ada-Seq-balanced ÷ GRPO-n4, round mode beside streaming mode, in one run.

All arms train the embedded testbed (warm-started tiny Llama, the convergence benchmark's pool) and their steps are
*interleaved* (one step of each arm in turn), so a change in background load hits every arm alike. Medians over
steps after a warm-up.

    python benchmarks/step_time.py                  # 60 timed steps per arm
    python benchmarks/step_time.py --steps 5 --warmup 1   # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
ARMS = {
    "grpo-n4": ({"name": "uniform", "n": 4}, {}),
    "seq-bal round": ({"name": "seq", "exit": "balanced"}, {}),
    "seq-bal streaming": ({"name": "seq", "exit": "balanced"}, {"streaming": True, "slots": 256}),
    "seq-bal streaming+prefetch": (
        {"name": "seq", "exit": "balanced"},
        {"streaming": True, "slots": 256, "prefetch": True},
    ),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS / "step_time.json"))
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    from reinforce_ada.compare import POOL_WEIGHTS
    from reinforce_ada.train_config import TrainConfig, apply_overrides
    from reinforce_ada.trainer import Trainer

    trainers = {}
    for arm, (strategy, gen) in ARMS.items():
        cfg = apply_overrides(
            TrainConfig(),
            {
                "strategy": strategy,
                "generation": gen,
                "model": {"threads": args.threads},
                "task": {"level_weights": list(POOL_WEIGHTS)},
                "run": {"run_dir": f"runs/step_time/{arm.replace(' ', '_')}", "progress": False, "batch_size": 32},
            },
            "step_time",
        )
        trainers[arm] = Trainer(dataclasses.replace(cfg), tensorboard=False)
    times: dict[str, dict[str, list[float]]] = {a: {"step": [], "gen": [], "train": [], "samples": []} for a in ARMS}
    for i in range(args.warmup + args.steps):
        for arm, tr in trainers.items():
            m = tr.train_step()
            if i >= args.warmup:
                for k, key in (
                    ("step", "time_step_s"),
                    ("gen", "time_generate_s"),
                    ("train", "time_train_s"),
                    ("samples", "samples_generated"),
                ):
                    times[arm][k].append(m[key])
    med = {a: {k: float(np.median(v)) for k, v in t.items()} for a, t in times.items()}
    base = med["grpo-n4"]["step"]
    result = {
        "command": "python benchmarks/step_time.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "threads": args.threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "median": med,
        "ratio_vs_grpo_n4": {a: m["step"] / base for a, m in med.items()},
        "raw": times,
    }
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'arm':<28}{'s/step':>8}{'gen s':>8}{'train s':>8}{'samples':>9}{'÷ GRPO-n4':>11}")
    for a, m in med.items():
        print(
            f"{a:<28}{m['step']:>8.3f}{m['gen']:>8.3f}{m['train']:>8.3f}{m['samples']:>9.0f}{m['step'] / base:>11.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
