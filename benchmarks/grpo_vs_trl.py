"""P5: our GRPO-n4 optimizer step vs TRL's `GRPOTrainer` on the same tiny model and prompts (`benchmarks.speed`'s
first part; the method is in its module docstring, 1).
"""

from __future__ import annotations

import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from benchmarks.harness import OtherCpu, median, real_tokens
from reinforce_ada.models.load import load_policy
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.tasks import arithmetic
from reinforce_ada.training.config import GenerationConfig, ModelConfig, RunConfig, TrainConfig
from reinforce_ada.types import Prompt

if TYPE_CHECKING:
    from benchmarks.speed_settings import Settings

P5_DIFFERENCES = (
    "decode: ours is the trainer's default engine, SlotEngine (static slot KV cache written in place, a fused decode "
    "step calling the model's own modules); TRL calls model.generate (HF's cache, mask and output machinery per step)",
    "prefill: TRL's model.generate prefills each of the B prompts n times (B*n rows); our engine prefills B distinct "
    "prompts once and copies their KV cache to the n rows",
    "our engine computes the sampler's log-prob of every generated token (a log_softmax per decode step); TRL's "
    "non-vLLM path does not, and with steps_per_generation=num_iterations=1 uses the detached current log-probs",
    "tokenisation: our engine tokenises the B distinct prompts of a step (the loss rows reuse cached ids); TRL "
    "tokenises all B*n prompt rows of the step",
    "TRL's loss forward uses its fused LM head (projects only completion positions, in tiles); ours projects every "
    "position then gathers (vocab is 20 here, so both are small)",
    "ours applies dual-clip (c=10) to negative advantages; TRL has no dual-clip (elementwise, negligible)",
    "TRL (transformers Trainer) adds per-step bookkeeping inside the timed step: reward/length/clip/entropy metrics, "
    "FLOP and token counting, loss NaN filtering, callbacks and an LR-scheduler step",
    "prompt order differs (TRL's shuffled RepeatSampler vs our PromptOrder) from the same arithmetic pool, so "
    "completion lengths differ a little per step: `tokens` reports the median generated tokens per step of each",
    "ours skips AdamW when every advantage in the batch is zero (steps_without_update counts it); TRL always steps",
    "learning-rate schedules differ (ours: linear warm-up; TRL: constant): no effect on time",
)
"""Work the two P5 sides do differently that the configuration cannot remove (written into speed.json)."""


def ours_steps(s: Settings) -> dict[str, list[float]]:
    """Per timed step of `Trainer.train_step()` (strategy uniform = GRPO-n, embedded model): seconds and tokens."""
    from reinforce_ada.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(
            strategy=strategy_config(name="uniform", n=s.group),
            model=ModelConfig(threads=s.threads),
            generation=GenerationConfig(max_new_tokens=s.max_new_tokens, temperature=1.0, top_k=0, top_p=1.0),
            run=RunConfig(batch_size=s.batch_prompts, steps=s.warmup_steps + s.steps, seed=s.seed, run_dir=tmp),
        )
        trainer = Trainer(cfg, tensorboard=False)
        ms = []
        for _ in range(s.warmup_steps + s.steps):
            engine_s = trainer.engine.throughput.seconds
            ms.append(trainer.train_step())
            ms[-1]["engine_s"] = trainer.engine.throughput.seconds - engine_s
        ms = ms[s.warmup_steps :]
        trainer.tracker.close()
    pick = lambda k: [float(m[k]) for m in ms]  # noqa: E731
    return {
        "step_s": pick("time_step_s"),
        "generate_s": pick("engine_s"),
        "collect_s": pick("time_generate_s"),
        "update_s": pick("time_train_s"),
        "tokens": pick("tokens_generated"),
        "samples_trained": pick("samples_trained"),
        # the trainer skips AdamW when every advantage is zero (TRL never does); loss and grad_norm are then 0.0
        "no_update": [float(m["loss"] == 0.0 and m["grad_norm"] == 0.0) for m in ms],
        "torch_threads": [float(torch.get_num_threads())],
    }


def arithmetic_reward(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """TRL reward function: our arithmetic verifier on each decoded completion."""
    return [arithmetic.verify(c, a) for c, a in zip(completions, answer, strict=True)]


def trl_args(s: Settings, out_dir: str) -> Any:
    """A `GRPOConfig` doing our step's work: see the module docstring (1)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=s.batch_prompts * s.group,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_iterations=1,
        num_generations=s.group,
        max_completion_length=s.max_new_tokens,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="dapo",
        scale_rewards="group",
        learning_rate=2e-4,
        lr_scheduler_type="constant",
        optim="adamw_torch",
        weight_decay=0.0,
        max_grad_norm=1.0,
        gradient_checkpointing=False,  # TRL's GRPO default is True; our trainer keeps activations, so TRL does too
        max_steps=s.warmup_steps + s.steps,
        use_cpu=True,
        bf16=False,
        fp16=False,
        use_vllm=False,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
        seed=s.seed,
    )


def trl_steps(s: Settings, model_path: Path, prompts: list[Prompt]) -> dict[str, list[float]]:
    """Per timed TRL `GRPOTrainer` optimizer step (on_step_begin -> on_step_end): seconds and tokens."""
    import datasets
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.begin: list[float] = []
            self.end: list[float] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.begin.append(time.perf_counter())

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.end.append(time.perf_counter())

    model, tokenizer = load_policy(model_path, ModelConfig(threads=s.threads))
    data = datasets.Dataset.from_dict({"prompt": [p.text for p in prompts], "answer": [p.answer for p in prompts]})
    timer, gen = StepTimer(), {"seconds": [], "tokens": []}
    eos, plain_generate = [tokenizer.eos_token_id], model.generate

    def timed_generate(*a: Any, **kw: Any) -> torch.Tensor:
        t0 = time.perf_counter()
        out = plain_generate(*a, **kw)
        gen["seconds"].append(time.perf_counter() - t0)
        gen["tokens"].append(real_tokens(out[:, kw["input_ids"].shape[1] :], eos))
        return out

    model.generate = timed_generate  # TRL calls the unwrapped model's generate: on one CPU, this very object
    with tempfile.TemporaryDirectory() as tmp:
        args = trl_args(s, tmp)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=arithmetic_reward,
            args=args,
            train_dataset=data,
            processing_class=tokenizer,
            callbacks=[timer],
        )
        torch.set_num_threads(s.threads)
        trainer.train()
    w = s.warmup_steps
    if len(gen["seconds"]) != len(timer.end):
        raise RuntimeError(
            f"expected one generate call per optimizer step, got {len(gen['seconds'])} for {len(timer.end)} steps"
        )
    return {
        "step_s": [e - b for b, e in zip(timer.begin, timer.end, strict=True)][w:],
        "generate_s": gen["seconds"][w:],
        "tokens": [float(t) for t in gen["tokens"][w:]],
        "step_to_step_s": [b1 - b0 for b0, b1 in zip(timer.begin, timer.begin[1:], strict=False)][w:],
        "torch_threads": [float(torch.get_num_threads())],
    }


def summarize(runs: list[dict[str, list[float]]]) -> dict[str, Any]:
    """Pool the per-step lists of every round; medians of each, `rest_s` = step - generate per step."""
    pooled = {k: [x for r in runs for x in r[k]] for k in runs[0]}
    pooled["rest_s"] = [a - g for a, g in zip(pooled["step_s"], pooled["generate_s"], strict=True)]
    out: dict[str, Any] = {k: median(v) for k, v in pooled.items() if k not in ("no_update", "torch_threads")}
    out["torch_threads"] = sorted({int(t) for t in pooled["torch_threads"]})
    out["steps_timed"] = len(pooled["step_s"])
    if "no_update" in pooled:
        out["steps_without_update"] = int(sum(pooled["no_update"]))
    out["step_s_all"] = pooled["step_s"]
    return out


def measure_grpo(s: Settings, model_path: Path, prompts: list[Prompt], *, with_trl: bool = True) -> dict[str, Any]:
    """P5: `rounds` x (ours, TRL), each a fresh trainer; TRL's failure or absence is recorded, not raised."""
    out: dict[str, Any] = {"differences": list(P5_DIFFERENCES)}
    if with_trl:
        try:
            import trl

            out["trl_version"] = trl.__version__
        except ImportError as e:  # optional benchmark dependency
            out["trl_error"] = f"trl is not installed ({e}); pip install trl"
    else:
        out["trl_error"] = "skipped (--skip-trl)"
    ours, theirs = [], []
    with OtherCpu() as other:
        for r in range(s.rounds):
            ours.append(ours_steps(replace(s, seed=s.seed + r)))
            if "trl_error" in out:
                continue
            try:
                theirs.append(trl_steps(replace(s, seed=s.seed + r), model_path, prompts))
            except Exception as e:  # a third-party trainer: its failure is a result to report, with its text
                out["trl_error"] = f"{type(e).__name__}: {e}"
                out["trl_traceback"] = traceback.format_exc()
    out["other_cpu_cores"] = other.cores
    out["ours"] = summarize(ours)
    if theirs and "trl_error" not in out:
        out["trl"] = summarize(theirs)
        out["ratio_step_time"] = out["ours"]["step_s"] / out["trl"]["step_s"]
        out["ratio_generate_time"] = out["ours"]["generate_s"] / out["trl"]["generate_s"]
        out["ratio_rest_time"] = out["ours"]["rest_s"] / out["trl"]["rest_s"]
    return out


# -- table, plot ---------------------------------------------------------------------------------------------------
