"""Rollout throughput with Ray rollout workers: samples/s with workers = 0 (in process), 1 and 2 on this machine.

    python -m benchmarks.ray_throughput              # the embedded testbed model and SmolLM2-135M -> ray_throughput.*
    python -m benchmarks.ray_throughput --quick      # a smoke run of the testbed model, under $TMPDIR

1) Sides: `inproc-2t` (workers = 0, what the trainer does today: `engines.local_engine` in this process with 2 torch
   threads), `inproc-1t` (the same with 1 thread), `ray-1` and `ray-2` (`RayRolloutPool` with 1 and 2 workers, one
   CPU and one torch thread each, on a local Ray). Every side samples the same workload -- P prompts x k samples,
   temperature 1, at most N new tokens -- through `generate` (one call = one round of a step).
2) Repeats call the sides in turn (ABCD ABCD ...) after a warm-up call each, so drift on the shared machine hits all
   sides; samples/s is the median over repeats with a 95% bootstrap interval of the median. `busy_cores` is the
   whole machine's busy CPU (every process, ours and others') during the side's calls: on 2 cores, other work
   competes with the workers directly.
3) What to expect on 2 cores: workers cannot add compute here -- two 1-thread workers use the same 2 cores as one
   2-thread process -- so Ray can at best match `inproc-2t`, minus its overheads (pickling requests and samples,
   one actor call per chunk, the split of a round into two half-size batches).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from reinforce_ada.engines import local_engine
from reinforce_ada.engines.config import GenerationConfig, RolloutConfig
from reinforce_ada.engines.ray_pool import RayRolloutPool
from reinforce_ada.models.config import ModelConfig
from reinforce_ada.models.load import load_policy
from reinforce_ada.types import Prompt, Request

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = {
    # name: (prompts, samples per prompt, max new tokens)
    "testbed": (32, 8, 8),
    "smollm2": (8, 4, 32),
}
"""Workloads: the embedded testbed's default step shape (Python-overhead bound) and a compute-bound SmolLM2 one."""


def model_path(name: str) -> Path:
    if name == "testbed":
        from reinforce_ada.tasks.config import TaskConfig
        from reinforce_ada.training.warm_start import resolve_model_path

        return resolve_model_path(ModelConfig(), TaskConfig(), progress=False)
    from benchmarks import smollm2

    return smollm2.cached_model()


def prompts_for(name: str, tokenizer: Any, n: int) -> list[Prompt]:
    if name == "testbed":
        from reinforce_ada import tasks
        from reinforce_ada.tasks.config import TaskConfig

        return tasks.build(TaskConfig(), tokenizer)[0][:n]
    from benchmarks.engine_race import prompts_for as chat_prompts

    return chat_prompts(tokenizer, n)


def sides(name: str, path: Path, gen: GenerationConfig, seed: int) -> tuple[dict[str, Any], Any]:
    """Each side's engine: the in-process ones share one model copy; each pool loads its own workers."""
    model, tok = load_policy(path, ModelConfig(path=str(path), threads=2))
    model.eval()
    kw = dict(decode="auto", streaming=False, slots=gen.slots, batch_size=gen.batch_size, seed=seed)
    kw.update(max_new_tokens=gen.max_new_tokens, temperature=gen.temperature)
    out: dict[str, Any] = {
        "inproc-2t": (2, local_engine(model, tok, **kw)),
        "inproc-1t": (1, local_engine(model, tok, **kw)),
    }
    for k in (1, 2):
        rollout = RolloutConfig(workers=k, cpus_per_worker=0.5, threads=1)  # both pools fit 2 cores
        cfg = ModelConfig(path=str(path), device="cpu")
        pool = RayRolloutPool(
            model, tok, model_path=str(path), model_cfg=cfg, rollout=rollout, generation=gen, seed=seed
        )
        out[f"ray-{k}"] = (None, pool)
    return out, tok


def median_interval(x: list[float], draws: int = 10_000, seed: int = 0) -> list[float]:
    a = np.asarray(x, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(draws, len(a)))
    med = np.median(a[idx], axis=1)
    return [float(np.percentile(med, 2.5)), float(np.percentile(med, 97.5))]


def race(name: str, repeats: int, seed: int = 0) -> dict[str, Any]:
    P, k, N = MODELS[name]
    path = model_path(name)
    gen = GenerationConfig(max_new_tokens=N, temperature=1.0, slots=256, batch_size=256)
    engines, tok = sides(name, path, gen, seed)
    requests = [Request(p, k) for p in prompts_for(name, tok, P)]
    rates: dict[str, list[float]] = {s: [] for s in engines}
    busy: dict[str, list[float]] = {s: [] for s in engines}
    tokens: dict[str, list[int]] = {s: [] for s in engines}

    def call(side: str) -> tuple[float, int, float]:
        threads, engine = engines[side]
        if threads is not None:
            torch.set_num_threads(threads)
        psutil.cpu_percent(None)
        t0 = time.perf_counter()
        samples = engine.generate(requests)
        wall = time.perf_counter() - t0
        cores = psutil.cpu_percent(None) / 100 * (os.cpu_count() or 1)
        return wall, sum(s.num_tokens for s in samples), cores

    try:
        for side in engines:
            call(side)  # warm-up
        for _ in range(repeats):
            for side in engines:
                wall, n_tok, cores = call(side)
                rates[side].append(len(requests) * k / wall)
                busy[side].append(cores)
                tokens[side].append(n_tok)
    finally:
        for _, engine in engines.values():
            if isinstance(engine, RayRolloutPool):
                engine.close()
    return {
        "model": name,
        "path": str(path),
        "prompts": P,
        "samples_per_prompt": k,
        "max_new_tokens": N,
        "sides": {
            s: {
                "samples_per_s": float(np.median(rates[s])),
                "interval_95": median_interval(rates[s]),
                "samples_per_s_all": rates[s],
                "tokens_per_call_median": float(np.median(tokens[s])),
                "busy_cores_median": float(np.median(busy[s])),
            }
            for s in engines
        },
    }


def plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["models"]
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, r in zip(axes[0], runs, strict=True):
        names = list(r["sides"])
        med = [r["sides"][s]["samples_per_s"] for s in names]
        lo = [m - r["sides"][s]["interval_95"][0] for s, m in zip(names, med, strict=True)]
        hi = [r["sides"][s]["interval_95"][1] - m for s, m in zip(names, med, strict=True)]
        ax.bar(names, med, yerr=[lo, hi], capsize=4, color=["#4c72b0", "#8fa8d6", "#dd8452", "#c44e52"])
        ax.set_title(f"{r['model']}: {r['prompts']} prompts x {r['samples_per_prompt']}, <= {r['max_new_tokens']} tok")
        ax.set_ylabel("samples / s (median, 95% CI)")
    fig.suptitle(f"Ray rollout workers on {results['machine']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="testbed,smollm2", help=f"comma list of {sorted(MODELS)}")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="testbed only, 2 repeats, output under $TMPDIR")
    ap.add_argument("--out", default=str(RESULTS / "ray_throughput"))
    args = ap.parse_args()
    if args.quick:
        args.models, args.repeats, args.out = "testbed", 2, str(Path(tempfile.gettempdir()) / "ray_throughput")
    import ray

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by the workers; in-process sides set their own
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False)
    results: dict[str, Any] = {
        "command": "python -m benchmarks.ray_throughput " + shlex.join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "repeats": args.repeats,
        "models": [race(name, args.repeats) for name in args.models.split(",")],
    }
    ray.shutdown()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, out)
    for r in results["models"]:
        for s, v in r["sides"].items():
            lo, hi = v["interval_95"]
            print(f"{r['model']:8s} {s:10s} {v['samples_per_s']:8.1f} samples/s  [{lo:.1f}, {hi:.1f}]")
    print(f"-> {out.with_suffix('.json')}, {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
