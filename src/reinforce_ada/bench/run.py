"""One training run of `reinforce-ada compare`: the trainer's own steps, evaluated exactly by the bench.

1) `run_job(job)` builds a `Trainer` on the job's pool (a prompt file) and testbed weights, then calls
   `trainer.train_step()` itself, so the trainer needs no evaluation hook: every `eval_every` steps (and at 0 and
   the end) the bench evaluates the held-out prompts with `evaluation.exact` (one forward pass, no sampling noise).
2) Accuracy is the pool-weighted mean of the per-level exact pass rates (`Job.level_weights`: each level's share of
   the pool), or the plain mean for prompts without levels.
3) At the end it also samples the held-out set with the trainer's own evaluation (Ave@k at temperature 1) and
   records both numbers: the gap is what exact evaluation does not count (whitespace variants, special tokens).
4) The record keeps per-step series (`SERIES`, one entry per step from step 1), among them what `bench.costmodel`
   prices a step by on other hardware (`rows_per_round`: each step's list of samples per sequential round, and the
   samples trained; rounds, longest completion and tokens trained beside them), and the machine it ran on: `cpu` and
   `load` (the 1-minute load average at start and end), so its wall-clock can be read against load.
Everything a job does is fixed by its fields (seeded), so jobs can run in any order or in worker processes.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.config import StrategyConfig


@dataclass(frozen=True)
class Job:
    pool: str
    arm: str
    strategy: StrategyConfig
    lr: float
    seed: int
    steps: int
    batch_size: int
    eval_every: int
    model_path: str
    train_path: str
    eval_path: str
    level_weights: tuple[tuple[int, float], ...] | None
    """(level, share of the pool) pairs that weight the per-level accuracies; None: plain mean over prompts."""
    run_dir: str
    threads: int = 1
    max_new_tokens: int = 8
    check_samples: int = 4
    """Samples per held-out prompt for the end-of-run sampled check (0 skips it)."""
    phase: str = "main"
    """`sweep` or `main`: which part of the benchmark the job belongs to."""
    train: tuple[tuple[str, Any], ...] = ()
    """The arm's own settings (`optim.KEY`, `replay.KEY`, `run.batch_size`, `prior.samples`; `bench.arms.Arm.train`)
    beyond the lr; () for most arms."""
    max_tokens: int | None = None
    """Run until this many generated tokens (the arm's prior pass included); `steps` is then only a cap. None: run
    `steps` steps."""
    eval_every_tokens: int | None = None
    """With `max_tokens`: evaluate at every multiple of this many tokens (and at the start and the end) instead of
    every `eval_every` steps, so arms of different samples per step are read on the same token grid."""
    value_errors: bool = False
    """Log each step's baseline errors against the exact pass rates of its prompts (`value_probe`)."""

    @property
    def prompts_per_step(self) -> int:
        """The arm's prompts per step: its `run.batch_size`, else the benchmark's."""
        return int(dict(self.train).get("run.batch_size", self.batch_size))

    @property
    def key(self) -> str:
        return f"{self.phase}/{self.pool}/{self.arm}/lr{self.lr:g}/seed{self.seed}"


def eval_steps(steps: int, every: int) -> list[int]:
    """0, every, 2 every, ..., steps (the end is always evaluated).

    >>> eval_steps(25, 10)
    [0, 10, 20, 25]
    """
    return sorted({0, steps, *range(every, steps, every)})


def pool_accuracy(per_level: dict[str, float], overall: float, weights: tuple[tuple[int, float], ...] | None) -> float:
    if not weights:
        return overall
    total = sum(w for _, w in weights)
    return float(sum(w * per_level[f"eval_accuracy_L{lv}"] for lv, w in weights) / total)


def train_config(job: Job) -> Any:
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    # exact match of the answer: on running-sums pools that is `running_sums_strict`, the event the exact rate measures
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": job.model_path, "threads": job.threads},
            "task": {"name": "file", "path": job.train_path, "eval_path": job.eval_path, "verifier": "arithmetic"},
            "generation": {"max_new_tokens": job.max_new_tokens},
            "optim": {"lr": job.lr, **{k.removeprefix("optim."): v for k, v in job.train if k.startswith("optim.")}},
            "replay": {k.removeprefix("replay."): v for k, v in job.train if k.startswith("replay.")},
            "run": {
                "steps": job.steps,
                "batch_size": job.prompts_per_step,
                "seed": job.seed,
                "eval_every": 0,
                "eval_samples": max(1, job.check_samples),
                "progress": False,
                "run_dir": job.run_dir,
            },
        },
        f"compare job {job.key}",
    )
    return dataclasses.replace(cfg, strategy=job.strategy)


def run_job(job: Job) -> dict[str, Any]:
    """Train one arm on one pool with one seed and lr; return its curves and per-step series (JSON-ready)."""
    from reinforce_ada.evaluation.exact import exact_pass_rates, summarize_exact
    from reinforce_ada.training.trainer import Trainer
    from reinforce_ada.training.warm_start import machine

    shutil.rmtree(job.run_dir, ignore_errors=True)
    load_start = load_average()
    t_start = time.perf_counter()
    tr = Trainer(train_config(job), tensorboard=False)
    held_out = tr.eval_prompts
    at = set(eval_steps(job.steps, job.eval_every))
    rec: dict[str, Any] = {"key": job.key, "pool": job.pool, "arm": job.arm, "lr": job.lr, "seed": job.seed}
    rec.update(steps=job.steps, phase=job.phase, eval_step=[], accuracy=[], per_level={}, eval_tokens=[])
    rec["eval_samples"] = []
    series: dict[str, list[float]] = {k: [] for k in SERIES}
    rows: list[list[int]] = []  # samples per sequential round, one list per step
    longest: list[list[int]] = []  # the longest completion of each round, one list per step
    tokens = samples = 0
    eval_s = 0.0
    if job.value_errors:
        tr.probes.append(value_probe(job.max_new_tokens))
    train = dict(job.train)
    k0 = int(train.get("prior.samples", 0))
    if k0:  # the arm's prior is measured by sampling: its tokens and samples are charged before step 1
        t0 = time.perf_counter()
        how = str(train.get("prior.value", "mean"))
        spent = prior_pass(tr, k0, how, train.get("prior.drop") == "unsolved")
        tokens, samples = spent["tokens"], spent["samples"]
        rec["prior"] = {"samples_per_prompt": k0, **spent}
        rec["prior"]["seconds"] = time.perf_counter() - t0  # charged on the CPU axis (`costmodel.prior_seconds`)

    def evaluate(step: int) -> dict[str, float]:
        nonlocal eval_s
        t0 = time.perf_counter()
        rates = exact_pass_rates(tr.model, tr.tokenizer, held_out, max_new_tokens=job.max_new_tokens)
        m = summarize_exact(held_out, rates)
        rec["eval_step"].append(step)
        rec["accuracy"].append(pool_accuracy(m, m["eval_accuracy"], job.level_weights))
        rec["eval_tokens"].append(tokens)
        rec["eval_samples"].append(samples)
        for k, v in m.items():
            if k.startswith("eval_accuracy_L"):
                rec["per_level"].setdefault(k[len("eval_accuracy_") :], []).append(v)
        eval_s += time.perf_counter() - t0
        return m

    last = evaluate(0)
    next_at = tokens + (job.eval_every_tokens or 0)
    for step in range(1, job.steps + 1):
        m = tr.train_step()
        tokens += m["tokens_generated"]
        samples += m["samples_generated"]
        for k, src in SERIES.items():
            v = m.get(src)
            series[k].append(float(v) if isinstance(v, int | float) and np.isfinite(v) else float("nan"))
        rows.append([int(x) for x in m.get("samples_per_round", [])])
        longest.append([int(x) for x in m.get("longest_per_round", [])])
        done = job.max_tokens is not None and tokens >= job.max_tokens
        if job.max_tokens is None and step in at:
            last = evaluate(step)
        elif job.max_tokens is not None and (done or step == job.steps or tokens >= next_at):
            last = evaluate(step)
            while job.eval_every_tokens and next_at <= tokens:
                next_at += job.eval_every_tokens
        if done:
            break
    rec.update(series, rows_per_round=rows, longest_per_round=longest, steps=len(rows))
    if job.check_samples:
        sampled = tr.evaluate()  # the trainer's sampled Ave@k on the same held-out prompts
        rec["sampled_check"] = {
            "samples": job.check_samples,
            "prompts": len(held_out),
            "exact": rec["accuracy"][-1],
            "sampled": pool_accuracy(sampled, sampled["eval_accuracy"], job.level_weights),
            "exact_mean": last["eval_accuracy"],
            "sampled_mean": sampled["eval_accuracy"],
        }
    rec["epochs"] = tr.cfg.optim.epochs  # updates per batch: the GPU model charges the learner for each
    rec["seconds"] = {"total": time.perf_counter() - t_start, "eval": eval_s}
    rec["load"] = {"start": load_start, "end": load_average(), "cores": os.cpu_count()}
    rec["cpu"] = machine()
    shutil.rmtree(job.run_dir, ignore_errors=True)
    return rec


PROBE_METRICS: dict[str, str] = {
    "value_abs_error": "Mean over trained groups of abs(the strategy's value from before the step - the exact pass "
    "rate) (nan without a value, advantage other than tracker).",
    "group_mean_abs_error": "Mean over trained groups of abs(the mean reward drawn for the prompt - its exact pass "
    "rate).",
}
"""What `value_probe` adds to each training line of a benchmark run that asks for it (docs/metrics.md)."""


def value_probe(max_new_tokens: int) -> Any:
    """A trainer probe (`Trainer.probes`): the step's prompts' exact pass rates p under the policy that drew their
    samples (before the update), and the mean |estimate - p| over the step's trained groups of two estimates of p:
    `value_abs_error`, the strategy's value from before the step (`Group.baseline`: the tracker, advantage=tracker;
    nan when the arm has none), and `group_mean_abs_error`, the mean reward of what the step drew for the prompt (the
    group's own estimate, GRPO's baseline)."""
    from reinforce_ada.evaluation.exact import exact_pass_rates

    def probe(tr: Any, batch: Any) -> dict[str, float]:
        groups = batch.groups
        if not groups:
            return {"value_abs_error": float("nan"), "group_mean_abs_error": float("nan")}
        p = exact_pass_rates(tr.model, tr.tokenizer, [g.prompt for g in groups], max_new_tokens=max_new_tokens)
        drawn = np.array([np.mean(g.pool_rewards) for g in groups])
        values = [(g.baseline, q) for g, q in zip(groups, p, strict=True) if g.baseline is not None]
        return {
            "value_abs_error": float(np.mean([abs(v - q) for v, q in values])) if values else float("nan"),
            "group_mean_abs_error": float(np.mean(np.abs(drawn - np.asarray(p)))),
        }

    return probe


PRIOR_VALUES = ("mean", "softmax")
"""How the prior pass turns a prompt's k correct of n into its prior value (`prior_pass`)."""
A_STAR_BETA = 0.5
"""A*-PO's beta_1 (TRL's `A2POConfig` default): V* = beta log mean exp(r / beta) over the offline samples."""


def prior_pass(tr: Any, samples_per_prompt: int, value: str = "mean", drop_unsolved: bool = False) -> dict[str, int]:
    """An offline prior, measured: `samples_per_prompt` samples of every training prompt from the starting policy,
    scored, made the strategy memory's prior means; returns what it generated, which the arm is charged: `tokens`,
    `samples`, `prompt_tokens` (each sample's prompt), `prefill_tokens` (each prompt once) and `longest`. `value`:
    "mean" is SPO's smoothed pass rate (k + 1/2) / (n + 1); "softmax" A*-PO's optimal value V* = beta log mean
    exp(r / beta) (beta = `A_STAR_BETA`, rewards 0/1 by the threshold). `drop_unsolved`: A*-PO's filter, the prompts
    none of whose samples was correct leave the training pool (at least one stays)."""
    from reinforce_ada.sampling.ledger import score
    from reinforce_ada.sampling.order import PromptOrder
    from reinforce_ada.types import Request

    if value not in PRIOR_VALUES:
        raise ValueError(f"prior.value={value!r}; choose one of {list(PRIOR_VALUES)}")
    prompts = {p.id: p for p in tr.train_prompts}
    drawn = tr.engine.generate([Request(p, samples_per_prompt) for p in prompts.values()])
    score(drawn, prompts, tr.verifier)
    correct: dict[str, int] = dict.fromkeys(prompts, 0)
    for s in drawn:
        correct[s.prompt_id] += float(s.reward) > tr.strategy.opts.threshold
    n = samples_per_prompt
    if value == "softmax":
        b = A_STAR_BETA
        rates = {pid: b * float(np.log((k * np.exp(1.0 / b) + (n - k)) / n)) for pid, k in correct.items()}
    else:
        rates = {pid: (k + 0.5) / (n + 1) for pid, k in correct.items()}
    tr.strategy.attach(prior_rates=rates)
    if drop_unsolved and any(correct.values()):
        tr.train_prompts = [p for p in tr.train_prompts if correct[p.id] > 0]
        tr.order = PromptOrder(tr.train_prompts, tr.cfg.run.seed)
    return {
        "tokens": int(sum(s.num_tokens for s in drawn)),
        "samples": len(drawn),
        "prompt_tokens": int(sum(s.prompt_tokens for s in drawn)),
        "prefill_tokens": int(sum({s.prompt_id: s.prompt_tokens for s in drawn}.values())),
        "longest": max((s.num_tokens for s in drawn), default=0),
    }


def load_average() -> float | None:
    """The 1-minute load average (processes running or waiting for a core), None where the OS has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


SERIES = {
    "samples_per_step": "samples_generated",
    "tokens_per_step": "tokens_generated",
    "prompt_tokens_per_step": "prompt_tokens",
    "prefill_tokens_per_step": "prefill_tokens",
    "rounds": "rounds",
    "max_completion_tokens": "max_completion_tokens",
    "samples_trained": "samples_trained",
    "tokens_trained": "tokens_trained",
    "no_signal_share": "no_signal_prompt_share",
    "zero_adv_share": "zero_adv_prompt_share",
    "time_step_s": "time_step_s",
    "time_generate_s": "time_generate_s",
    "time_train_s": "time_train_s",
    "replay_share": "replay_share",
    "value_abs_error": "value_abs_error",
    "group_mean_abs_error": "group_mean_abs_error",
}
"""Per-step series kept from the trainer's metrics (name in the result: metric name)."""
