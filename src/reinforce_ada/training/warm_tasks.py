"""The tasks the embedded model is warm-started on, the SFT settings, and what a warm start measures and records.

1) A `WarmTask` is what `training.warm_start` needs of a task: its split, a fresh problem of a level (the SFT
   batches), its verifier for sampled pass rates, its `max_new_tokens`, the tokenizer's characters, the context it
   needs, the SFT settings of its shipped warm start and the folder they ship in. `WARM_TASKS` holds `arithmetic`
   (the testbed's short answers, `models/data/tiny-arithmetic`) and `running_sums` (long answers, 8 to about 100
   tokens, `models/data/tiny-running-sums`); `warm_task(task_cfg)` picks one by the config's type.
2) `SFTConfig` (the supervised phase) and `sft_loss` (its loss, in length buckets for long answers); the sampled
   and exact pass rates a warm start measures, the spread of its per-prompt rates and, for running sums, the share
   of final-correct samples whose working is not the canonical one (`working_gap`) and how long its wrong answers
   run (`lengths`).
3) The shipped running-sums warm start is trained on answers that sometimes overshoot, adding the last term again
   after the last step (`SFTConfig.repeat_rate`,
   `tasks.running_sums.with_repeats`): without them its wrong answers were as long as its right ones (1,316 sampled
   answers, none 20% past its canonical length), so no length lever had anything to cut.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reinforce_ada.models.tiny import CHARS, LONG_CHARS
from reinforce_ada.tasks import arithmetic, running_sums
from reinforce_ada.tasks.arithmetic import ArithmeticConfig
from reinforce_ada.tasks.running_sums import RunningSumsConfig
from reinforce_ada.types import Prompt

DATA = Path(__file__).resolve().parents[1] / "models" / "data"


@dataclass(frozen=True)
class SFTConfig:
    """The supervised warm start: short on purpose, so that the hard levels stay unsolved."""

    steps: int = 2000
    """Optimizer steps (fewer if `time_limit_s` runs out first)."""
    batch_size: int = 128
    """Problems per step, drawn fresh from the task's generator (never from its held-out set)."""
    lr: float = 3e-3
    """Peak AdamW learning rate, held constant after warm-up (3e-3 reached the wanted spread in 2000 steps; the
    probe's 1e-3 needed about 3000)."""
    warmup_steps: int = 100
    """Linear warm-up from 0 to `lr`."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    level_weights: tuple[float, ...] = (0.3, 0.25, 0.2, 0.1, 0.08, 0.04, 0.03)
    """Share of each task level in the SFT batches, biased to easy levels (one weight per task level)."""
    seed: int = 0
    """Seed of the SFT batches and the sampling that measures pass rates."""
    time_limit_s: float | None = None
    """Stop early after this many seconds of training (makes the result depend on the machine's speed)."""
    measure_prompts: int = 64
    """Held-out prompts per level used to measure the pass rates written next to the model."""
    measure_samples: int = 16
    """Samples per prompt for those pass rates."""
    repeat_rate: float = 0.0
    """Running sums only: after the last step of an SFT answer of t terms, the last term is added again with chance
    `repeat_rate x (t - 2)` (`tasks.running_sums.with_repeats`): the warm start then writes some wrong answers
    longer than right ones, most of them on long sums."""
    repeat_again: float = 0.0
    """Running sums only: the chance of one more repeat after a repeat (a loop)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "measure_prompts", "measure_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"SFTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"SFTConfig.lr must be > 0, got {self.lr}")
        if self.warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError("SFTConfig.warmup_steps and weight_decay must be >= 0")
        if any(not w >= 0 for w in self.level_weights) or sum(self.level_weights) <= 0:
            raise ValueError(f"SFTConfig.level_weights must be >= 0 with a positive sum, got {self.level_weights}")
        for name in ("repeat_rate", "repeat_again"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"SFTConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"SFTConfig.time_limit_s must be > 0 or None, got {self.time_limit_s}")


@dataclass(frozen=True)
class WarmTask:
    name: str
    config_type: type
    shipped_dir: Path
    chars: str
    """The tokenizer's characters (`models.tiny.build_char_tokenizer(chars=...)`)."""
    max_position: int
    """Context of the task's embedded model: its longest prompt plus `max_new_tokens`, rounded up."""
    make_split: Callable[[Any], tuple[list[Prompt], list[Prompt]]]
    draw: Callable[[Any, SFTConfig, int, random.Random], Prompt]
    """(task config, SFT config, level, rng) -> a fresh problem of that level, its answer the SFT target."""
    verify: Callable[[str, str], float]
    max_new_tokens: Callable[[Any], int]
    longest: Callable[[Any], int]
    """The longest prompt plus `max_new_tokens`: what the context must hold."""
    sft: dict[str, Any] = field(default_factory=dict)
    """`SFTConfig` fields of the shipped warm start that differ from `SFTConfig`'s defaults."""
    length_buckets: int = 1
    """Slices of each SFT batch by length (`warm_start.sft_loss`); part of the procedure (recorded for tasks other
    than arithmetic, whose record stays as shipped)."""


def _draw_arithmetic(cfg: ArithmeticConfig, sft: SFTConfig, level: int, rng: random.Random) -> Prompt:
    if sft.repeat_rate or sft.repeat_again:
        raise ValueError("SFTConfig.repeat_rate and repeat_again apply to running sums only: arithmetic has no steps")
    digits = cfg.levels[level - 1]
    a, b = (rng.randrange(arithmetic.low(d), arithmetic.low(d) + arithmetic.count(d)) for d in digits)
    return arithmetic.make_prompt(a, b, level, "sft")


def _draw_running_sums(cfg: RunningSumsConfig, sft: SFTConfig, level: int, rng: random.Random) -> Prompt:
    prompt = running_sums.make_prompt(running_sums.draw_terms(cfg.levels[level - 1], rng), level, "sft")
    if not sft.repeat_rate:
        return prompt  # no draw from rng: the warm starts trained before the repeats keep their batches
    limit = running_sums.max_new_tokens(cfg)
    answer = running_sums.with_repeats(prompt.meta["terms"], rng, sft.repeat_rate, sft.repeat_again, limit)
    return replace(prompt, answer=answer)


ARITHMETIC = WarmTask(
    name="arithmetic",
    config_type=ArithmeticConfig,
    shipped_dir=DATA / "tiny-arithmetic",
    chars=CHARS,
    max_position=64,
    make_split=arithmetic.make_split,
    draw=_draw_arithmetic,
    verify=arithmetic.verify,
    max_new_tokens=arithmetic.max_new_tokens,
    longest=lambda cfg: max(sum(d) + 3 for d in cfg.levels) + arithmetic.max_new_tokens(cfg),  # <bos> + =
)
RUNNING_SUMS = WarmTask(
    name="running_sums",
    config_type=RunningSumsConfig,
    shipped_dir=DATA / "tiny-running-sums",
    chars=LONG_CHARS,
    max_position=256,
    make_split=running_sums.make_split,
    draw=_draw_running_sums,
    verify=running_sums.verify_strict,  # the sampled check counts the canonical answer, as the exact rates do
    max_new_tokens=running_sums.max_new_tokens,
    longest=lambda cfg: max(map(running_sums.longest_prompt, cfg.levels)) + running_sums.max_new_tokens(cfg),
    sft=dict(
        steps=5000,
        batch_size=64,
        level_weights=(0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.05),
        measure_prompts=32,
        repeat_rate=0.04,
        repeat_again=0.7,
    ),
    length_buckets=4,
)
WARM_TASKS = {t.name: t for t in (ARITHMETIC, RUNNING_SUMS)}


def warm_task(task_cfg: Any) -> WarmTask:
    """The warm-start task of a split config (`ArithmeticConfig` or `RunningSumsConfig`)."""
    for t in WARM_TASKS.values():
        if isinstance(task_cfg, t.config_type):
            return t
    raise TypeError(f"no warm start for {type(task_cfg).__name__}; known: {[t.name for t in WARM_TASKS.values()]}")


def default_configs(name: str) -> tuple[Any, Any, Any]:
    """(task, model, SFT) configs of task `name`'s shipped warm start."""
    from reinforce_ada.models.tiny import TinyModelConfig

    t = WARM_TASKS[name]
    return t.config_type(), TinyModelConfig(max_position=t.max_position), SFTConfig(**t.sft)


def sample_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    samples_per_prompt: int,
    max_new_tokens: int,
    *,
    batch_size: int = 2048,
    seed: int | None = None,
) -> list[tuple[Prompt, str | None]]:
    """`samples_per_prompt` completions of each prompt at temperature 1.0 with plain `generate`, as (prompt, text);
    text is None for a completion that did not end with `<eos>` within `max_new_tokens`. `seed` fixes the sampling
    without touching the caller's global RNG."""
    import torch

    was_training = model.training
    model.eval()
    rows = [p for p in prompts for _ in range(samples_per_prompt)]
    out: list[tuple[Prompt, str | None]] = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        if seed is not None:
            torch.manual_seed(seed)
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            enc = tokenizer([p.text for p in chunk], return_tensors="pt", padding=True)
            ids_BT = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            for p, ids in zip(chunk, ids_BT[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
                ok = tokenizer.eos_token_id in ids
                out.append((p, tokenizer.decode(ids[: ids.index(tokenizer.eos_token_id)]) if ok else None))
    model.train(was_training)
    return out


def level_means(rows: Sequence[tuple[Prompt, Any]], verify: Any = None) -> dict[int, float]:
    """Mean per `Prompt.level` of (prompt, value) rows; with `verify`, the value is a completion (None: 0)."""
    by: dict[int, list[float]] = {}
    for p, v in rows:
        score = float(v) if verify is None else (verify(v, p.answer) if v is not None else 0.0)
        by.setdefault(p.level, []).append(score)  # type: ignore[arg-type]
    return {level: sum(r) / len(r) for level, r in sorted(by.items())}


SPREAD_BANDS = (0.05, 0.95)
"""A prompt's exact pass rate below the first is "near 0", above the second "near 1", else "middle"."""


def spread(rates: Sequence[float]) -> dict[str, float]:
    """Shares of prompts near 0, in the middle and near 1 (`SPREAD_BANDS`), and the quartiles of the rates."""
    r = np.asarray(rates, dtype=float)
    lo, hi = SPREAD_BANDS
    return {
        "prompts": int(r.size),
        f"share_below_{lo}": float((r < lo).mean()),
        "share_middle": float(((r >= lo) & (r <= hi)).mean()),
        f"share_above_{hi}": float((r > hi).mean()),
        "quartiles": [float(q) for q in np.quantile(r, (0.25, 0.5, 0.75))],
    }


def working_gap(samples: Sequence[tuple[Prompt, str | None]]) -> dict[str, Any]:
    """Among sampled completions whose final result is right (`running_sums.verify`), the share whose working is not
    the canonical one (`verify_strict` says 0): how far the default verifier's pass rate lies above the strict
    (and exact, teacher-forced) one. Overall and per level."""
    by: dict[Any, list[int]] = {}
    for p, text in samples:
        if text is None or not running_sums.verify(text, p.answer):
            continue
        wrong = 0 if running_sums.verify_strict(text, p.answer) else 1
        for key in ("all", p.level):
            by.setdefault(key, [0, 0])
            by[key][0] += 1
            by[key][1] += wrong
    final, wrong = by.get("all", [0, 0])
    return {
        "samples": len(samples),
        "final_correct": final,
        "final_correct_wrong_working": wrong,
        "share": wrong / final if final else None,
        "share_by_level": {str(k): v[1] / v[0] for k, v in sorted((k, v) for k, v in by.items() if k != "all")},
    }


LONG_RATIO = 1.2
"""A sampled answer "runs long" past this multiple of its canonical length (`lengths`)."""


def lengths(samples: Sequence[tuple[Prompt, str | None]], max_new_tokens: int) -> dict[str, Any]:
    """Whether wrong answers run long: for the right (final result, `running_sums.verify`) and the wrong sampled
    completions, their count, mean length over the canonical answer's (both with `<eos>`; a completion cut at
    `max_new_tokens` counts that many), the share past `LONG_RATIO` x canonical and the share cut."""
    by: dict[str, list[tuple[float, bool]]] = {"right": [], "wrong": []}
    for p, text in samples:
        ok = text is not None and running_sums.verify(text, p.answer) == 1.0
        n = max_new_tokens if text is None else len(text) + 1  # one character, one token (`models.tiny`)
        by["right" if ok else "wrong"].append((n / (len(p.answer) + 1), text is None))
    out: dict[str, Any] = {}
    for key, rows in by.items():
        ratios = np.array([r for r, _ in rows], dtype=float)
        out[key] = {
            "samples": len(rows),
            "mean_over_canonical": float(ratios.mean()) if rows else None,
            f"share_over_{LONG_RATIO}x": float((ratios > LONG_RATIO).mean()) if rows else None,
            "share_cut": float(np.mean([cut for _, cut in rows])) if rows else None,
        }
    return out


def running_sums_record(
    held_out: Sequence[Prompt],
    exact: Sequence[float],
    samples: Sequence[tuple[Prompt, str | None]],
    max_new_tokens: int,
) -> dict[str, Any]:
    """What `warm_start.json` records for the running-sums warm start beyond the per-level rates: the spread of the
    held-out prompts' exact rates, overall and per level, the working gap of the sampled check and the lengths of
    its right and wrong answers."""
    levels = sorted({p.level for p in held_out})
    return {
        "exact_spread": spread(exact),
        "exact_spread_by_level": {
            str(lv): spread([r for p, r in zip(held_out, exact, strict=True) if p.level == lv]) for lv in levels
        },
        "working_gap": working_gap(samples),
        "lengths": lengths(samples, max_new_tokens),
        "final_result_pass_rates": {str(k): v for k, v in level_means(samples, running_sums.verify).items()},
    }


def sft_loss(model: Any, input_ids: torch.Tensor, labels: torch.Tensor, buckets: int = 1) -> torch.Tensor:
    """Mean cross-entropy over the batch's answer tokens. With `buckets` > 1 the rows, sorted by length, go through
    the model in that many slices, each cut to its own longest row: the same mean (up to float order) for less
    padding, which is most of a running-sums batch (answers of 8 to 100 tokens)."""
    if buckets == 1:
        return model(input_ids=input_ids, labels=labels).loss
    lengths = (labels != -100).long().cumsum(1).argmax(1) + 1  # each row ends at its last labelled token (EOS)
    total = (labels[:, 1:] != -100).sum()  # the model shifts labels by one
    loss = input_ids.new_zeros((), dtype=torch.float32)
    for rows in torch.argsort(lengths, stable=True).chunk(buckets):
        width = int(lengths[rows].max())
        part = labels[rows, :width]
        loss = loss + model(input_ids=input_ids[rows, :width], labels=part).loss * (part[:, 1:] != -100).sum() / total
    return loss


def running_sums_configs(model: Any, task: Any) -> tuple[Any, Any, Any]:
    """The running-sums warm start a run of the embedded model loads (`warm_start.resolve_model_path`): the shipped
    configs with the run's model shape; `model.sft_steps` left at its default means the shipped warm start's own
    steps; the held-out split (never trained on) is the run's `eval_size` and `seed`."""
    from reinforce_ada.models.config import ModelConfig

    _, tiny, sft = default_configs("running_sums")
    tiny = replace(tiny, hidden_size=model.hidden_size, num_layers=model.num_layers, num_heads=model.num_heads)
    if model.sft_steps != ModelConfig().sft_steps:
        sft = replace(sft, steps=model.sft_steps)
    return RunningSumsConfig(eval_size=task.eval_size, seed=task.seed), tiny, sft


def first_per_level(prompts: Sequence[Prompt], n: int) -> list[Prompt]:
    """The first `n` prompts of each level, in order."""
    seen: dict[int | None, int] = {}
    kept = []
    for p in prompts:
        if seen.get(p.level, 0) < n:
            seen[p.level] = seen.get(p.level, 0) + 1
            kept.append(p)
    return kept


def machine() -> str:
    """CPU model, cores and torch version: where a warm start was trained (it is bit-reproducible only there)."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux: platform's answer stands
        pass
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"
