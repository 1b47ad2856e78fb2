"""P4: wall-clock per step of Ada-Seq-balanced ÷ GRPO-n4, round mode beside streaming mode, in one run.

All arms train the same model on the same prompts and their steps are *interleaved* (one step of each arm in turn),
so a change in background load hits every arm alike. Medians over steps after a warm-up. Two models:
- `--model tiny` (default): the embedded testbed (warm-started tiny Llama, the convergence benchmark's pool), 8-token
  completions, 1 thread.
- `--model smollm2`: SmolLM2-135M-Instruct with LoRA r=16 on `benchmarks/smollm2.py`'s arithmetic word problems (chat
  template, up to 24 tokens, numeric verifier), 2 threads.
Arms run on the default decode (`fused`: `SlotEngine`) unless named `hf-decode` (HF's forward: `HFEngine` for
rounds, `HFStreamEngine` for streaming -- the engines before the fused decode existed).

    python -m benchmarks.step_time                                  # tiny, 60 timed steps per arm
    python -m benchmarks.step_time --model smollm2 --steps 4 --warmup 1
    python -m benchmarks.step_time --steps 5 --warmup 1              # smoke
    python -m benchmarks.step_time --model tiny-long                 # long answers vs short, per generated token

`--model tiny-long` asks whether a step stays as cheap per generated token where answers are long: the embedded
model on its long-answer task (`running_sums`, answers of about 10-100 tokens, its shipped warm start) beside the
same model on the short-answer testbed (`arithmetic`, 2-6 tokens), GRPO-n4 and SPO on each, all four interleaved.
Each step's time is split where it goes: prefill (each distinct prompt's forward), decode (the fused decode steps),
the rest of generation (sampling, admission, scoring), and the learner (`time_train_s`); the table divides each by
the step's generated tokens, and the ratio long / short per generated token is the figure (`results/
step_time_long.json`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"
SEQ = {"name": "seq", "exit": "balanced"}
GRPO = {"name": "uniform", "n": 4}
ARMS = {
    "grpo-n4": (GRPO, {}),
    "seq-bal round": (SEQ, {"streaming": False}),
    "seq-bal streaming": (SEQ, {"streaming": True}),
    "seq-bal streaming+prefetch": (SEQ, {"streaming": True, "prefetch": True}),
    "grpo-n4 hf-decode": (GRPO, {"decode": "hf"}),
    "seq-bal round hf-decode": (SEQ, {"decode": "hf", "streaming": False}),
    "seq-bal streaming hf-decode": (SEQ, {"decode": "hf", "streaming": True}),
}
DEFAULT_ARMS = {
    "tiny": list(ARMS),
    "smollm2": ["grpo-n4", "seq-bal round", "seq-bal streaming", "grpo-n4 hf-decode", "seq-bal round hf-decode"],
}


def model_overrides(model: str, threads: int, work: Path) -> dict:
    """Config overrides (beyond strategy and generation mode) for each model's workload."""
    if model == "tiny":
        from reinforce_ada.bench.testbed import parse_pool

        weights = parse_pool("default").weights  # the convergence benchmark's default pool
        return {"model": {"threads": threads}, "task": {"level_weights": list(weights)}, "run": {"batch_size": 32}}
    from benchmarks import smollm2

    path = smollm2.cached_model()
    work.mkdir(parents=True, exist_ok=True)
    smollm2.make_data(work / "train.jsonl", 400, seed=0)
    return {
        "model": {"path": str(path), "lora_r": 16, "threads": threads},
        "task": {"name": "file", "path": str(work / "train.jsonl"), "template": "chat", "verifier": "numeric"},
        "generation": {"max_new_tokens": 24, "batch_size": 128},
        "optim": {"lr": 1e-4, "micro_batch_size": 32},
        "run": {"batch_size": 8},
    }


def _baseline(arm: str, med: dict) -> str:
    """The GRPO-n4 arm on the same decode as `arm` (the hf-decode one for hf-decode arms, when it ran)."""
    return "grpo-n4 hf-decode" if "hf-decode" in arm and "grpo-n4 hf-decode" in med else "grpo-n4"


def record_summary(result: dict, path: Path) -> None:
    """P4 in summary.json: the testbed run owns the goal's top-level fields, other models a nested entry each."""
    from benchmarks.harness import update_summary

    ratio = result["ratio_vs_grpo_n4"]
    modes = {k: ratio[a] for k, a in (("round", "seq-bal round"), ("streaming", "seq-bal streaming")) if a in ratio}
    entry = {
        "value": min(modes.values()),
        "goal": "<= 1.3",
        "what": "wall-clock per step, Ada-Seq-balanced / GRPO-n4 (n=4), best of round and streaming mode on the "
        "default (fused) decode, arms interleaved",
        **modes,
        "default_mode": modes.get("streaming"),
        "ratios": ratio,
        "samples_per_step": {a: m["samples"] for a, m in result["median"].items()},
        "peak_rss_gib": result["peak_rss_gib"],
    }
    if result["model"] == "tiny":
        old = json.loads(path.read_text()).get("P4", {}) if path.exists() else {}
        keep = {k: v for k, v in old.items() if isinstance(v, dict) and k != "ratios" and k != "samples_per_step"}
        update_summary(path, {"P4": {**keep, **entry}}, result["command"])
    else:
        update_summary(path, {"P4": entry}, result["command"], nested={"P4": result["model"]})


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    med = result["median"]
    names = list(med)
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 1.5))
    gen = [med[a]["gen"] for a in names]
    train = [med[a]["step"] - med[a]["gen"] for a in names]
    ax.barh(names, gen, label="generate (+ score)")
    ax.barh(names, train, left=gen, label="train + rest")
    for i, a in enumerate(names):
        ax.text(med[a]["step"], i, f" {result['ratio_vs_grpo_n4'][a]:.2f}x", va="center")
    ax.invert_yaxis()
    ax.set_xlabel("median seconds per step (ratio to GRPO-n4, fused decode)")
    ax.set_title(f"P4 step time, {result['model']} ({result['date']}, {result['threads']} thread(s))")
    ax.set_xlim(0, 1.15 * max(med[a]["step"] for a in names))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


LONG_WORKLOADS = {
    "short": {"task": {"name": "arithmetic"}},
    "long": {"task": {"name": "running_sums"}, "generation": {"max_new_tokens": 163}},  # the task's room
}
"""Per workload: its config overrides (the long task's `max_new_tokens` is `tasks.running_sums.max_new_tokens`)."""
LONG_ARMS = {"grpo-n4": ({"name": "uniform", "n": 4}, 16), "spo-32": ({"name": "spo"}, 32)}
"""Per arm: (strategy, prompts per step): 64 and 32 samples a step."""
PARTS = ("prefill", "decode", "gen_other", "learner", "other")


def _timed(obj: Any, method: str, box: dict[str, float], part: str) -> None:
    """Wrap `obj.method` so that its wall time adds up in `box[part]`."""
    inner = getattr(obj, method)

    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*a, **kw)
        finally:
            box[part] += time.perf_counter() - t0

    setattr(obj, method, wrapper)


def run_long(args: argparse.Namespace, threads: int) -> int:
    """`--model tiny-long` (module docstring): long / short seconds per generated token, split by part."""
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    trainers, boxes, load_before = {}, {}, cpu_load_now()
    scratch = Path(tempfile.mkdtemp(prefix="step_time_long_"))  # fresh run folders: nothing resumed
    for work, workload in LONG_WORKLOADS.items():
        for arm, (strategy, prompts) in LONG_ARMS.items():
            name = f"{arm} {work}"
            over = {
                "model": {"threads": threads},
                **{k: dict(v) for k, v in workload.items()},
                "strategy": dict(strategy),
                "run": {"batch_size": prompts, "run_dir": str(scratch / f"{arm}_{work}"), "progress": False},
            }
            tr = Trainer(apply_overrides(TrainConfig(), over, "step_time"), tensorboard=False)
            boxes[name] = dict.fromkeys(("prefill", "decode"), 0.0)
            if not all(hasattr(tr.engine, m) for m in ("_prefill_prompts", "_forward")):
                raise SystemExit(f"{name}: engine {type(tr.engine).__name__} is not the fused decode; no split")
            _timed(tr.engine, "_prefill_prompts", boxes[name], "prefill")
            _timed(tr.engine, "_forward", boxes[name], "decode")
            trainers[name] = tr
    raw: dict[str, dict[str, list[float]]] = {a: defaultdict(list) for a in trainers}
    for i in range(args.warmup + args.steps):
        for name, tr in trainers.items():
            box = boxes[name]
            box.update(prefill=0.0, decode=0.0)
            m = tr.train_step()
            if i < args.warmup:
                continue
            step, gen, learner = m["time_step_s"], m["time_generate_s"], m["time_train_s"]
            parts = {
                "prefill": box["prefill"],
                "decode": box["decode"],
                "gen_other": gen - box["prefill"] - box["decode"],
                "learner": learner,
                "other": step - gen - learner,
            }
            raw[name]["tokens"].append(float(m["tokens_generated"]))
            raw[name]["step"].append(step)
            for k, v in parts.items():
                raw[name][k].append(v)
    per_token = {}  # medians over steps of seconds per generated token, each part and the step
    for name, r in raw.items():
        tok = np.asarray(r["tokens"])
        per_token[name] = {k: float(np.median(np.asarray(r[k]) / tok)) for k in ("step", *PARTS)}
        per_token[name]["tokens_per_step"] = float(np.median(tok))
        per_token[name]["s_per_step"] = float(np.median(r["step"]))
    ratio = {arm: per_token[f"{arm} long"]["step"] / per_token[f"{arm} short"]["step"] for arm in LONG_ARMS}
    interval = {arm: _ratio_interval(raw[f"{arm} long"], raw[f"{arm} short"]) for arm in LONG_ARMS}
    result = {
        "command": "python -m benchmarks.step_time " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load": {"before": load_before, "after": cpu_load_now()},  # 1-minute load average
        "threads": threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "what": "median over steps of seconds per generated token (step and its parts); long / short per arm",
        "per_token": per_token,
        "long_over_short": ratio,
        "long_over_short_90": interval,
        "interval": "90% bootstrap over steps (2000 resamples of each arm's steps, ratio of medians)",
        "goal": "<= 2.0 (long / short seconds per generated token)",
        "raw": {a: dict(r) for a, r in raw.items()},
    }
    out = Path(args.out or RESULTS / "step_time_long.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot_long(result, out.with_suffix(".png"))
    print(f"{'arm':<20}{'tok/step':>9}{'ms/tok':>8}" + "".join(f"{p:>10}" for p in PARTS))
    for name, m in per_token.items():
        cells = "".join(f"{1e3 * m[p]:>10.3f}" for p in PARTS)
        print(f"{name:<20}{m['tokens_per_step']:>9.0f}{1e3 * m['step']:>8.3f}{cells}")
    for arm, r in ratio.items():
        lo, hi = interval[arm]
        print(f"{arm}: long / short seconds per generated token = {r:.2f} [{lo:.2f}, {hi:.2f}] (goal <= 2.0)")
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


def _ratio_interval(long: dict, short: dict, draws: int = 2000) -> list[float]:
    """90% bootstrap interval of median(long s/token) / median(short s/token), each arm's steps resampled."""
    rng = np.random.default_rng(0)
    a = np.asarray(long["step"]) / np.asarray(long["tokens"])
    b = np.asarray(short["step"]) / np.asarray(short["tokens"])
    ra = np.median(a[rng.integers(0, len(a), (draws, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), (draws, len(b)))], axis=1)
    return [float(q) for q in np.quantile(ra / rb, [0.05, 0.95])]


def cpu_load_now() -> float:
    return os.getloadavg()[0]


def plot_long(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = result["per_token"]
    names = list(per)
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(names) + 1.6))
    left = np.zeros(len(names))
    for part in PARTS:
        vals = np.array([1e3 * max(per[n][part], 0.0) for n in names])
        ax.barh(names, vals, left=left, label=part)
        left += vals
    ax.invert_yaxis()
    ax.set_xlabel("median milliseconds per generated token")
    ratios = ", ".join(f"{a} {r:.2f}x" for a, r in result["long_over_short"].items())
    ax.set_title(f"long / short per generated token: {ratios} ({result['date']}, {result['threads']} thread)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=len(PARTS), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=[*sorted(DEFAULT_ARMS), "tiny-long"], default="tiny")
    ap.add_argument("--arms", default=None, help=f"comma-separated subset of {list(ARMS)} (default: per model)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 tiny, 2 smollm2)")
    ap.add_argument("--out", default=None, help="JSON path (default results/step_time[_smollm2].json)")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    if args.model == "tiny-long":
        if args.arms:
            ap.error(f"--model tiny-long runs its own arms ({list(LONG_ARMS)}) on both tasks; leave --arms out")
        return run_long(args, args.threads or 1)
    arms = args.arms.split(",") if args.arms else DEFAULT_ARMS[args.model]
    if any(a not in ARMS for a in arms) or arms[0] != "grpo-n4":
        ap.error(f"--arms must start with grpo-n4 (the baseline) and name arms from {list(ARMS)}")
    threads = args.threads or (1 if args.model == "tiny" else 2)
    suffix = "" if args.model == "tiny" else f"_{args.model}"
    out = Path(args.out or RESULTS / f"step_time{suffix}.json")
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    base_overrides = model_overrides(args.model, threads, RESULTS / f"step_time{suffix}_work")
    trainers = {}
    for arm in arms:
        strategy, gen = ARMS[arm]
        over = {k: dict(v) for k, v in base_overrides.items()}
        over["strategy"] = strategy
        over["generation"] = {**over.get("generation", {}), **gen}
        over["run"] = {**over["run"], "run_dir": f"runs/step_time{suffix}/{arm.replace(' ', '_')}", "progress": False}
        cfg = apply_overrides(TrainConfig(), over, "step_time")
        trainers[arm] = Trainer(dataclasses.replace(cfg), tensorboard=False)
    times: dict[str, dict[str, list[float]]] = {a: {"step": [], "gen": [], "train": [], "samples": []} for a in arms}
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
        "command": "python -m benchmarks.step_time " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "model": args.model,
        "threads": threads,
        "engines": {a: type(tr.engine).__name__ for a, tr in trainers.items()},
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "steps": args.steps,
        "warmup": args.warmup,
        "median": med,
        "ratio_vs_grpo_n4": {a: m["step"] / base for a, m in med.items()},
        "ratio_vs_grpo_n4_same_decode": {a: m["step"] / med[_baseline(a, med)]["step"] for a, m in med.items()},
        "raw": times,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    if args.out is None:
        record_summary(result, RESULTS / "summary.json")
    print(f"{'arm':<30}{'s/step':>8}{'gen s':>8}{'train s':>8}{'samples':>9}{'÷ GRPO-n4':>11}{'same decode':>13}")
    for a, m in med.items():
        same = result["ratio_vs_grpo_n4_same_decode"][a]
        print(
            f"{a:<30}{m['step']:>8.3f}{m['gen']:>8.3f}{m['train']:>8.3f}{m['samples']:>9.0f}{m['step'] / base:>11.2f}"
            f"{same:>13.2f}"
        )
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
