"""GPU check: our default engine and our trainer on CUDA, on a randomly initialised Llama of SmolLM2-135M's shape.

    python -m benchmarks.gpu_check --out DIR            # on a GPU machine (about 4 minutes on an H200)
    python -m benchmarks.gpu_check --tiny --device cpu  # a smoke run of every section at toy sizes (the CPU test)

No weights travel and nothing is downloaded: the model is `LlamaForCausalLM(LlamaConfig(**SHAPES[shape]))` at HF's
default initialisation (std 0.02), and the tokenizer is the shipped char-level one (`models.tiny`'s specials and
characters) padded with filler tokens `<tN>` up to the shape's vocabulary, so the LM head has SmolLM2's size. Such a
model echoes its last token about 2 times in 3 and samples near-uniformly otherwise: EOS almost never comes, so
every row runs to `max_new_tokens` (throughput is measured at a fixed length).
1) Generation (as `speed.py`'s P6, reused from it): P prompts x k samples of the arithmetic task, <= N new tokens,
   T=1, no top-k/top-p, one call of all P*k rows per repeat. Sides: `engine` (what the trainer picks:
   `local_engine(decode="auto")` -> `SlotEngine`, the fused decode), `hf_engine` (`HFEngine`, HF's forward in our
   loop) and `generate` (`model.generate`, `num_return_sequences=k`). Each side gets one warm-up call, then the
   sides alternate for `repeats` rounds; median, min and max tokens/s. fp32 weights, then the same weights cast to
   bf16 (`model.to(bfloat16)`: what a bf16 sampler runs; the trainer's own sampler stays fp32 even with
   `model.bf16`, which only autocasts the learner). Peak CUDA memory of one extra, untimed call per side.
2) Training (as `step_time.py`'s P4, arms reused from it): `Trainer.train_step()` on the same random model saved to
   a folder, one Trainer per arm, steps interleaved across arms; GRPO-n4 and Ada-Seq-balanced (round and streaming),
   fp32 and `model.bf16` (autocast learner, recomputed old log-probs). Rewards come from `synthetic_reward`: each
   prompt has a pass rate from `RATES` (by a hash of its answer) and a completion passes by a hash of its text, so a
   random policy still gives the strategies mixed groups to work with. Medians of step, generate and train time,
   samples generated per step, and the sampler/learner log-prob mismatch the trainer reports.
3) Paths: `Trainer.evaluate()`, `save()`, and a fresh Trainer's `resume()` + one step, on CUDA.
4) Optionally a larger shape (`--big`, SmolLM2-1.7B's), generation in bf16 only, if the time budget allows.
Each section's failure is recorded with its traceback and the next section runs; the JSON is rewritten after every
section, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import shlex
import sys
import tempfile
import time
import traceback
import zlib
from pathlib import Path
from typing import Any

import torch

from benchmarks.gpu_check_report import plot, table
from benchmarks.gpu_shapes import (  # noqa: F401 (re-exported: the tests read them here)
    RATES,
    SHAPES,
    TINY,
    TRAIN_ARMS,
    Settings,
    padded_char_tokenizer,
    random_llama,
    sync,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def synthetic_reward(completion: str, answer: str) -> float:
    """1.0 for a completion whose text hashes below its prompt's pass rate (`RATES`, picked by the answer's hash).

    >>> synthetic_reward("", "7") in (0.0, 1.0)
    True
    """
    rate = RATES[zlib.crc32(answer.encode()) % len(RATES)]
    return 1.0 if zlib.crc32(completion.encode()) < rate * 2**32 else 0.0


def _bench(name: str) -> Any:
    """A sibling benchmark module (`speed`, `step_time`), imported lazily: they import transformers."""
    import importlib

    return importlib.import_module(f"benchmarks.{name}")


# -- 1) generation ------------------------------------------------------------------------------------------------
def generate_call(model: Any, tokenizer: Any, prompts: list, samples: int, gen_cfg: Any, eos: list[int]) -> int:
    """`speed.generate_call` with the inputs on the model's device; returns real tokens."""
    device = next(model.parameters()).device
    enc = tokenizer([p.text for p in prompts], add_special_tokens=False, padding=True, return_tensors="pt").to(device)
    with torch.inference_mode():
        out_RT = model.generate(**enc, generation_config=gen_cfg)
    completion_RN = out_RT[:, enc["input_ids"].shape[1] :].cpu()
    tokenizer.batch_decode(completion_RN, skip_special_tokens=True)
    return _bench("harness").real_tokens(completion_RN, eos)


def measure_generation(model: Any, tokenizer: Any, prompts: list, *, samples: int, s: Settings, repeats: int) -> dict:
    """Tokens/s of `engine`, `hf_engine` and `generate` on the same P x k rows (docstring, 1)."""
    from transformers import GenerationConfig

    from reinforce_ada.engines import local_engine
    from reinforce_ada.engines.hf import HFEngine

    speed = _bench("harness")
    device, rows, N = next(model.parameters()).device, len(prompts) * samples, s.max_new_tokens
    sampling = dict(max_new_tokens=N, temperature=1.0, seed=0)
    engine = local_engine(model, tokenizer, decode="auto", streaming=False, slots=rows, batch_size=rows, **sampling)
    hf_engine = HFEngine(model, tokenizer, batch_size=rows, **sampling)
    eos = engine.eos_token_ids
    gen_cfg = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=N,
        num_return_sequences=samples,
        pad_token_id=engine.pad_id,
        eos_token_id=eos,
    )
    sides = {
        "engine": lambda: speed.engine_call(engine, prompts, samples),
        "hf_engine": lambda: speed.engine_call(hf_engine, prompts, samples),
        "generate": lambda: generate_call(model, tokenizer, prompts, samples, gen_cfg, eos),
    }
    synced = {k: (lambda fn=fn: (fn(), sync(device))[0]) for k, fn in sides.items()}
    torch.manual_seed(0)  # model.generate samples from the global generator
    runs, other_cores = speed.alternate(synced, repeats)
    out: dict[str, Any] = {"prompts": len(prompts), "samples": samples, "rows": rows, "max_new_tokens": N}
    out["engine_class"], out["other_cpu_cores"] = type(engine).__name__, other_cores
    for name, r in runs.items():
        tps = [t / sec for t, sec in zip(r["tokens"], r["seconds"], strict=True)]
        out[name] = {"tokens_per_s": speed.median(tps), "min": min(tps), "max": max(tps), "tokens": r["tokens"]}
        out[name]["seconds"] = r["seconds"]
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            synced[name]()
            out[name]["peak_cuda_mib_over_weights"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
    for side in ("engine", "hf_engine"):
        out[f"ratio_{side}_vs_generate"] = out[side]["tokens_per_s"] / out["generate"]["tokens_per_s"]
    return out


def generation_section(
    shape: str, dtypes: tuple[str, ...], workloads: tuple, repeats: int, s: Settings, env: dict, deadline: float
) -> dict:
    """Every (dtype, workload) cell on one random model of `shape`; cells that would start after `deadline` are
    recorded as skipped."""
    from reinforce_ada.tasks import arithmetic

    device = env["device_obj"]
    tok = padded_char_tokenizer(SHAPES[shape]["vocab_size"], SHAPES[shape]["max_position_embeddings"])
    model = random_llama(shape, tok, device)
    train, _ = arithmetic.make_split(arithmetic.ArithmeticConfig())
    out: dict[str, Any] = {"parameters": sum(p.numel() for p in model.parameters())}
    for dtype in dtypes:
        model.to(getattr(torch, dtype))
        out[dtype] = {}
        for name, p, k in workloads:
            if time.perf_counter() > deadline:
                out[dtype][name] = {"skipped": "time budget spent"}
                continue
            out[dtype][name] = measure_generation(model, tok, train[:p], samples=k, s=s, repeats=repeats)
    del model
    return out


# -- 2) training ----------------------------------------------------------------------------------------------------
def save_random_model(s: Settings, folder: Path) -> Path:
    """The training arms' model: `random_llama(s.shape)` with its tokenizer, saved as a HF folder (fp32, CPU)."""
    shape = SHAPES[s.shape]
    tok = padded_char_tokenizer(shape["vocab_size"], shape["max_position_embeddings"])
    model = random_llama(s.shape, tok, torch.device("cpu"))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def make_trainer(arm: str, model_dir: Path, run_dir: Path, s: Settings, device: str) -> Any:
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    strategy, gen = _bench("step_time").ARMS[TRAIN_ARMS[arm][0]]
    # module:function, not this file's path: a verifier file defining a dataclass cannot be loaded by path (its
    # module is not in sys.modules while it runs); run from the repository root, `benchmarks` is importable
    over = {
        "model": {"path": str(model_dir), "device": device, "threads": s.threads, "bf16": TRAIN_ARMS[arm][1]},
        "task": {"verifier": "benchmarks.gpu_check:synthetic_reward", "eval_size": 2},
        "strategy": strategy,
        "generation": {"engine": "hf", "max_new_tokens": s.train_max_new_tokens, **gen},
        "run": {"batch_size": s.train_batch, "run_dir": str(run_dir), "progress": False, "eval_samples": 2},
    }
    return Trainer(apply_overrides(TrainConfig(), over, "gpu_check"), tensorboard=False)


KEEP = ("time_step_s", "time_generate_s", "time_train_s", "samples_generated", "tokens_generated", "samples_trained")
KEEP_TOO = ("reward_first_round", "mismatch_logp_abs_mean", "mismatch_logp_abs_max", "skipped_update")


def training_section(s: Settings, env: dict, work: Path, deadline: float) -> dict:
    """Interleaved steps of every arm on one saved random model (docstring, 2); steps stop at `deadline`."""
    import numpy as np

    model_dir = save_random_model(s, work / "model")
    trainers = {arm: make_trainer(arm, model_dir, work / arm.replace(" ", "_"), s, env["device"]) for arm in TRAIN_ARMS}
    raw: dict[str, dict[str, list[float]]] = {a: {k: [] for k in KEEP + KEEP_TOO} for a in TRAIN_ARMS}
    done = 0
    for i in range(s.warmup_steps + s.steps):
        if i > s.warmup_steps and time.perf_counter() > deadline:
            break
        for arm, tr in trainers.items():
            m = tr.train_step()
            if i >= s.warmup_steps:
                for k in KEEP + KEEP_TOO:
                    raw[arm][k].append(float(m.get(k, float("nan"))))
        done += i >= s.warmup_steps
    out: dict[str, Any] = {"steps_timed": done, "warmup_steps": s.warmup_steps, "batch_prompts": s.train_batch}
    out["engines"] = {a: type(tr.engine).__name__ for a, tr in trainers.items()}
    out["model_device"] = {a: str(next(tr.model.parameters()).device) for a, tr in trainers.items()}
    out["median"] = {a: {k: float(np.nanmedian(v)) if v else None for k, v in r.items()} for a, r in raw.items()}
    base = out["median"]["grpo-n4"]["time_step_s"]
    out["ratio_step_vs_grpo_n4"] = {a: m["time_step_s"] / base for a, m in out["median"].items()} if base else {}
    out["raw"] = raw
    out["paths"] = check_paths(trainers["grpo-n4"], model_dir, work, s, env["device"])
    return out


def check_paths(tr: Any, model_dir: Path, work: Path, s: Settings, device: str) -> dict:
    """evaluate(), save(), and resume() + one step in a fresh Trainer on the same run folder (docstring, 3)."""
    out: dict[str, Any] = {}
    for name, fn in (
        ("evaluate", lambda: {k: v for k, v in tr.evaluate().items() if isinstance(v, int | float)}),
        ("save", lambda: str(tr.save())),
        ("resume_and_step", lambda: _resume_and_step(tr, model_dir, work, s, device)),
    ):
        try:
            out[name] = {"ok": True, "result": fn()}
        except Exception as e:  # deliberate: a broken CUDA path is this check's finding, recorded with its traceback
            out[name] = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    return out


def _resume_and_step(tr: Any, model_dir: Path, work: Path, s: Settings, device: str) -> dict:
    tr.close()  # a run folder takes one trainer at a time (training.run_dir): hand it to the fresh one
    fresh = make_trainer("grpo-n4", model_dir, work / "grpo-n4", s, device)
    loaded = fresh.resume()
    same = all(torch.equal(a, b) for a, b in zip(tr.model.parameters(), fresh.model.parameters(), strict=True))
    m = fresh.train_step()
    fresh.close()
    return {"resumed": loaded, "step": m["step"], "weights_equal_after_resume": same, "time_step_s": m["time_step_s"]}


# -- the run ----------------------------------------------------------------------------------------------------------
def environment(device_name: str) -> dict:
    speed = _bench("harness")
    from reinforce_ada.models.load import resolve_device

    device = resolve_device(device_name)
    env: dict[str, Any] = {"device": str(device), "device_obj": device, "versions": speed.versions()}
    env["torch"], env["cuda_available"] = torch.__version__, torch.cuda.is_available()
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env["gpu"] = {"name": p.name, "capability": f"{p.major}.{p.minor}", "memory_gib": p.total_memory / 2**30}
        env["gpu"]["cuda_runtime"] = torch.version.cuda
        env["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    env["machine"] = speed.machine()
    return env


def run_section(res: dict, key: str, deadline: float, out_path: Path, fn: Any) -> None:
    """`res[key] = fn()`, or the reason it was skipped or failed; the JSON is rewritten either way."""
    t0 = time.perf_counter()
    if t0 > deadline:
        res[key] = {"skipped": "time budget spent"}
    else:
        try:
            res[key] = fn()
        except Exception as e:  # deliberate: one section's failure must not lose the others' measurements
            res[key] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            print(res[key]["traceback"], file=sys.stderr)
        res.setdefault("section_s", {})[key] = time.perf_counter() - t0
    out_path.write_text(json.dumps({k: v for k, v in res.items() if k != "device_obj"}, indent=1, default=str) + "\n")
    print(f"[gpu_check] {key}: {time.perf_counter() - t0:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for gpu_check.json/.png (default results/)")
    ap.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    ap.add_argument("--tiny", action="store_true", help="toy sizes for a CPU smoke run")
    ap.add_argument("--big", action="store_true", help="also generation on SmolLM2-1.7B's shape (bf16)")
    ap.add_argument("--budget-s", type=float, default=None, help="skip sections starting after this (default 420)")
    args = ap.parse_args(argv)
    if args.budget_s is not None and args.budget_s < 0:
        ap.error(f"--budget-s must be >= 0, got {args.budget_s}")
    s = TINY if args.tiny else Settings()
    s = dataclasses.replace(s, budget_s=args.budget_s if args.budget_s is not None else s.budget_s)
    start = time.perf_counter()
    deadline = start + s.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    out_path = args.out / "gpu_check.json"
    res: dict[str, Any] = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "settings": dataclasses.asdict(s),
    }
    try:
        import transformers  # noqa: F401
    except ImportError as e:  # the device machine may lack the project's dependencies: say so and stop
        res["error"] = f"transformers is not installed here ({e}); nothing measured"
        out_path.write_text(json.dumps(res, indent=1) + "\n")
        print(res["error"])
        return 2
    torch.set_num_threads(s.threads)
    from reinforce_ada.errors import ConfigError

    try:
        env = environment(args.device)
    except ConfigError as e:  # --device cuda without a GPU: the reason, not a traceback
        res["error"] = str(e)
        out_path.write_text(json.dumps(res, indent=1) + "\n")
        print(f"gpu_check: {e}", file=sys.stderr)
        return 2
    res["env"] = {k: v for k, v in env.items() if k != "device_obj"}
    # soft deadlines: generation cells start within the first half of the budget, timed training steps within 85%
    at = lambda share: start + share * s.budget_s  # noqa: E731
    gen = lambda: generation_section(s.shape, s.dtypes, s.workloads, s.repeats, s, env, at(0.5))  # noqa: E731
    run_section(res, "generation", deadline, out_path, gen)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        train = lambda: training_section(s, env, Path(work), at(0.85))  # noqa: E731
        run_section(res, "training", deadline, out_path, train)
    if args.big:
        wl = s.workloads[:1]
        big = lambda: generation_section(s.big_shape, ("bfloat16",), wl, s.big_repeats, s, env, deadline)  # noqa: E731
        run_section(res, "generation_big", at(0.8), out_path, big)
    res["wall_s"] = time.perf_counter() - start
    if env["device_obj"].type == "cuda":
        res["peak_cuda_gib"] = torch.cuda.max_memory_reserved(env["device_obj"]) / 2**30
    out_path.write_text(json.dumps(res, indent=1, default=str) + "\n")
    try:
        plot(res, args.out / "gpu_check.png")
    except Exception as e:  # deliberate: a missing section leaves the plot without data; the JSON holds the why
        print(f"plot skipped: {type(e).__name__}: {e}", file=sys.stderr)
    print(table(res))
    print(f"wrote {out_path} ({res['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
