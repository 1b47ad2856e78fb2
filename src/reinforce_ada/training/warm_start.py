"""The embedded model's supervised warm start, and where a run's model comes from.

1) `warm_start()` runs a short supervised phase of the tiny Llama (`models.tiny`) on the arithmetic task, or on the
   long-answer running sums (`training.warm_tasks` says what each task brings; loss on answer tokens only) so that
   pass rates at temperature 1.0 span easy (about 1) to hard (about 0) across levels:
   RL from a random model would see no reward, RL from a converged one no signal. The result is a plain HF folder
   cached under a hash of the three configs, with `warm_start.json` (configs, timings, the weights' sha256, sampled
   and exact per-level pass rates).
2) The default configs' warm start ships with the package (`models/data/tiny-arithmetic`, 0.5 MB): training is
   deterministic on one machine but not across CPUs (float reductions differ, and 2000 AdamW steps amplify them: a
   fresh clone on another CPU started levels 5-7 at a third of the pass rates), so every machine loads those
   weights instead of training its own. Any other config is trained and cached as before. `weights_sha256` names
   the weights a result was made from; `reinforce-ada compare` records it and flags other weights.
   The running-sums warm start ships the same way (`models/data/tiny-running-sums`, `training.warm_tasks`).
3) `resolve_model_path()` is `model.path`, or the embedded default: the shipped folder when the configs match.
4) `python -m reinforce_ada.training.warm_start running_sums` trains the named task's default warm start with
   `shipped=False` (so it really trains, one torch thread, seeded) into the cache and prints its folder and
   per-level pass rates; `--ship` copies it over the package's shipped folder (a maintainer's step: the weights are
   bit-reproducible only on the CPU and torch that built them, `machine()`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from reinforce_ada.cache import default_cache_dir
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.config import ModelConfig
from reinforce_ada.models.tiny import EOS, TinyModelConfig, build_char_tokenizer, build_tiny_llama
from reinforce_ada.tasks.arithmetic import ArithmeticConfig
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.training.tracking import progress_bar
from reinforce_ada.training.warm_tasks import (  # noqa: F401 (SFTConfig: re-exported, this module's public name)
    ARITHMETIC,
    RUNNING_SUMS,
    SFTConfig,
    first_per_level,
    level_means,
    machine,
    running_sums_record,
    sample_completions,
    sft_loss,
    warm_task,
)
from reinforce_ada.types import Prompt

WARM_START_VERSION = 1
"""Part of the cache key: bump it when the warm-start procedure changes so that old folders are not reused."""
INFO_FILE = "warm_start.json"
"""Written last into a warm-start folder: configs, steps, timings, weights hash and per-level pass rates."""
WEIGHTS_FILE = "model.safetensors"
SHIPPED_DIR = ARITHMETIC.shipped_dir
"""The default configs' warm start, shipped as package data (the reference testbed of `reinforce-ada compare`)."""
RUNNING_SUMS_DIR = RUNNING_SUMS.shipped_dir
"""The running-sums warm start (`training.warm_tasks`), shipped as package data too."""
EMBEDDED_TASKS = ("arithmetic", "running_sums", "file")
"""Tasks the embedded model trains on (a file's prompts checked against its characters: `context.embedded_fits`);
running_sums gets the running-sums warm start, the others the arithmetic one."""


def config_hash(task_cfg: Any, model_cfg: TinyModelConfig, sft_cfg: SFTConfig) -> str:
    """16 hex digits that change whenever any of the three configs (or `WARM_START_VERSION`) does."""
    return hashlib.sha256(json.dumps(_describe(task_cfg, model_cfg, sft_cfg), sort_keys=True).encode()).hexdigest()[:16]


def warm_start(
    task_cfg: Any,
    model_cfg: TinyModelConfig,
    sft_cfg: SFTConfig,
    cache_dir: Path | None = None,
    progress: bool = True,
    *,
    shipped: bool = True,
) -> Path:
    """Train (or reuse) the warm-started tiny Llama and return its folder.

    `task_cfg` is an `ArithmeticConfig` or a `RunningSumsConfig` (`training.warm_tasks.warm_task`).
    With `shipped` (the default), configs equal to the shipped warm start's return its folder without training
    (after checking its weights against the recorded sha256); `shipped=False` trains them like any other config.

    The folder holds the model (`save_pretrained`, safetensors), the tokenizer and `warm_start.json` with the three
    configs, the steps run, timings and the measured per-level pass rates. It is `cache_dir / config_hash(...)`; an
    existing folder is returned untouched, and a new one is written to a temporary folder and renamed into place,
    so a crash never leaves a half-written cache entry. Training is deterministic given the seeds and the number of
    torch threads (the defaults take about 110 s on one thread: 2000 steps at about 0.054 s each).
    """
    task = warm_task(task_cfg)
    if len(sft_cfg.level_weights) != len(task_cfg.levels):
        raise ValueError(
            f"SFTConfig.level_weights needs one weight per task level ({len(task_cfg.levels)}), "
            f"got {len(sft_cfg.level_weights)}"
        )
    if (longest := task.longest(task_cfg)) > model_cfg.max_position:
        raise ValueError(
            f"TinyModelConfig.max_position ({model_cfg.max_position}) must be >= {longest}, the longest sequence"
        )
    if shipped and shipped_matches(task_cfg, model_cfg, sft_cfg):
        _log(progress, f"warm start: the shipped weights {shipped_dir(task_cfg)}")
        return shipped_dir(task_cfg)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache_dir / config_hash(task_cfg, model_cfg, sft_cfg)
    if (final / INFO_FILE).exists():
        _log(progress, f"warm start: reusing {final}")
        return final
    tokenizer = build_char_tokenizer(chars=task.chars, max_length=model_cfg.max_position)
    model = build_tiny_llama(model_cfg, tokenizer)
    _, held_out = task.make_split(task_cfg)
    max_new = task.max_new_tokens(task_cfg)
    t0 = time.perf_counter()
    steps = _sft(model, tokenizer, task_cfg, sft_cfg, {p.text for p in held_out}, progress)
    train_s = time.perf_counter() - t0
    per_level = first_per_level(held_out, sft_cfg.measure_prompts)
    t0 = time.perf_counter()
    samples = sample_completions(model, tokenizer, per_level, sft_cfg.measure_samples, max_new, seed=sft_cfg.seed)
    rates = level_means(samples, task.verify)
    measure_s = time.perf_counter() - t0
    exact_by_prompt = exact_prompt_rates(model, tokenizer, held_out, max_new)
    exact = level_means(list(zip(held_out, exact_by_prompt, strict=True)))
    _log(progress, "warm start: pass rates " + " ".join(f"L{k}={v:.3f}" for k, v in sorted(exact.items())))
    info = {
        **_describe(task_cfg, model_cfg, sft_cfg),
        "steps": steps,
        "train_seconds": round(train_s, 2),
        "measure_seconds": round(measure_s, 2),
        "pass_rates": {str(k): v for k, v in sorted(rates.items())},
        "exact_pass_rates": {str(k): v for k, v in sorted(exact.items())},
        "built_on": machine(),
    }
    if task is RUNNING_SUMS:  # the long-answer task's own record (docs/long_answers.md)
        info.update(running_sums_record(held_out, exact_by_prompt, samples, max_new))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=cache_dir))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info["sha256"] = weights_sha256(tmp)
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
        tmp.rename(final)
    except OSError:
        # another process finished the same warm start first: keep its folder
        if not (final / INFO_FILE).exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _log(progress, f"warm start: wrote {final}")
    return final


def measure_pass_rates(
    model: LlamaForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    prompts: Sequence[Prompt],
    samples_per_prompt: int,
    max_new_tokens: int,
    *,
    batch_size: int = 2048,
    seed: int | None = None,
    verify: Any = ARITHMETIC.verify,
) -> dict[int, float]:
    """Mean `verify` reward per `Prompt.level` of `sample_completions` (a completion without `<eos>` scores 0)."""
    rows = sample_completions(
        model, tokenizer, prompts, samples_per_prompt, max_new_tokens, batch_size=batch_size, seed=seed
    )
    return level_means(rows, verify)


def _sft(
    model: LlamaForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    task_cfg: Any,
    cfg: SFTConfig,
    excluded: set[str],
    progress: bool,
) -> int:
    """Train on answer tokens only; returns the number of steps run."""
    rng = random.Random(f"sft-{cfg.seed}")
    buckets = warm_task(task_cfg).length_buckets
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))
    model.train()
    t0 = time.perf_counter()
    step = 0
    bar = progress_bar(progress, total=cfg.steps, desc="warm start", unit="step")  # with an ETA, like the RL steps
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        for step in range(1, cfg.steps + 1):
            input_ids, labels = _sft_batch(tokenizer, task_cfg, cfg, excluded, rng)
            loss = sft_loss(model, input_ids, labels, buckets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            elapsed = time.perf_counter() - t0
            bar.update(1)
            if step % 25 == 0 or step == cfg.steps:  # .item() syncs; every step would cost a little
                bar.set_postfix(loss=f"{loss.item():.4f}")
            if cfg.time_limit_s is not None and elapsed > cfg.time_limit_s:
                _log(progress, f"warm start: time limit reached at step {step}")
                break
    bar.close()
    return step


def _sft_batch(
    tokenizer: PreTrainedTokenizerFast,
    task_cfg: Any,
    cfg: SFTConfig,
    excluded: set[str],
    rng: random.Random,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded `prompt + answer + <eos>` ids and labels that are -100 except on the answer and `<eos>`.

    Right padding needs no attention mask: causal attention never lets a real token see the padding after it.
    """
    levels = rng.choices(range(1, len(task_cfg.levels) + 1), weights=cfg.level_weights, k=cfg.batch_size)
    prompts = []
    task = warm_task(task_cfg)
    for level in levels:
        while True:
            prompt = task.draw(task_cfg, cfg, level, rng)
            if prompt.text not in excluded:
                break
        prompts.append(prompt)
    prompt_ids = tokenizer([p.text for p in prompts])["input_ids"]
    answer_ids = tokenizer([p.answer + EOS for p in prompts])["input_ids"]
    width = max(len(p) + len(a) for p, a in zip(prompt_ids, answer_ids, strict=True))
    input_ids = torch.full((len(prompts), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(prompts), width), -100, dtype=torch.long)
    for row, (p, a) in enumerate(zip(prompt_ids, answer_ids, strict=True)):
        input_ids[row, : len(p) + len(a)] = torch.tensor(p + a)
        labels[row, len(p) : len(p) + len(a)] = torch.tensor(a)
    return input_ids, labels


def _describe(task_cfg: Any, model_cfg: TinyModelConfig, sft_cfg: SFTConfig) -> dict:
    name = warm_task(task_cfg).name
    return {
        "version": WARM_START_VERSION,
        # arithmetic's keys (and hashes) stay as shipped
        **({} if name == "arithmetic" else {"task_name": name, "length_buckets": warm_task(task_cfg).length_buckets}),
        "task": dataclasses.asdict(task_cfg),
        "model": dataclasses.asdict(model_cfg),
        # the repeats' keys appear only when set, so the warm starts trained before them keep their records and hashes
        "sft": {k: v for k, v in dataclasses.asdict(sft_cfg).items() if v or k not in ("repeat_rate", "repeat_again")},
    }


def _log(enabled: bool, msg: str) -> None:
    if enabled:
        print(msg, file=sys.stderr, flush=True)


def resolve_model_path(model: ModelConfig, task: TaskConfig, progress: bool = True) -> Path:
    """The folder to load: `model.path`, or the embedded model's cache entry (built when missing)."""
    if model.path is not None:
        from reinforce_ada.models.load import check_model_path

        return check_model_path(model.path)  # a folder here, or an `org/name` hub id; a missing folder fails now
    if task.name not in EMBEDDED_TASKS:
        here = ", ".join(str(_here(t.shipped_dir)) for t in (ARITHMETIC, RUNNING_SUMS))
        raise ConfigError(
            f"task {task.name!r} needs a model of yours: the embedded model is a character-level arithmetic model "
            f"(digits and + - * = ; #; it trains on {', '.join(EMBEDDED_TASKS[:-1])} and on a file of such prompts). "
            "Give --model.path FOLDER, e.g. models/smollm2 (`reinforce-ada models smollm2 --out models/smollm2`), "
            f"or one of the embedded model's own folders for a task it can do ({here})"
        )
    if task.name == "running_sums":
        from reinforce_ada.training.warm_tasks import running_sums_configs

        return warm_start(*running_sums_configs(model, task), progress=progress)
    tiny = TinyModelConfig(hidden_size=model.hidden_size, num_layers=model.num_layers, num_heads=model.num_heads)
    # the warm start depends on the held-out split (never trained on), not on the RL pool's size or mix, so pools
    # can change without retraining it; a file of prompts gets the shipped one (its [task] split is the file's)
    held_out_only = (
        ArithmeticConfig(eval_size=task.eval_size, seed=task.seed) if task.name == "arithmetic" else ArithmeticConfig()
    )
    return warm_start(held_out_only, tiny, SFTConfig(steps=model.sft_steps), progress=progress)


def shipped_dir(task_cfg: Any) -> Path:
    """The shipped folder of the task's warm start (read from this module, so tests can point it elsewhere)."""
    return RUNNING_SUMS_DIR if warm_task(task_cfg) is RUNNING_SUMS else SHIPPED_DIR


def _here(path: Path) -> Path:
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def warm_start_info(path: Path) -> dict[str, Any]:
    f = Path(path) / INFO_FILE
    return json.loads(f.read_text()) if f.exists() else {}


def weights_sha256(path: Path) -> str | None:
    """sha256 of a model folder's `model.safetensors` (None if it has none): which weights a result came from."""
    f = Path(path) / WEIGHTS_FILE
    if not f.exists():
        return None
    h = hashlib.sha256()
    with f.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def shipped_matches(task_cfg: Any, model_cfg: TinyModelConfig, sft_cfg: SFTConfig) -> bool:
    """Whether these configs are the shipped warm start's; raises if the shipped weights are not the recorded ones."""
    folder = shipped_dir(task_cfg)
    info = warm_start_info(folder)
    if not info:
        return False
    recorded = {k: info[k] for k in ("version", "task_name", "length_buckets", "task", "model", "sft") if k in info}
    if json.loads(json.dumps(_describe(task_cfg, model_cfg, sft_cfg))) != recorded:
        return False
    if weights_sha256(folder) != info["sha256"]:
        raise ConfigError(
            f"the shipped warm start {folder / WEIGHTS_FILE} does not match its recorded sha256 "
            f"{info['sha256'][:12]}...: the installation is damaged; reinstall reinforce-ada"
        )
    return True


def exact_prompt_rates(
    model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, prompts: Sequence[Prompt], max_new_tokens: int
) -> list[float]:
    """Exact pass rate at temperature 1 (`evaluation.exact`) of each prompt: no sampling noise."""
    from reinforce_ada.evaluation.exact import exact_pass_rates

    return [float(r) for r in exact_pass_rates(model, tokenizer, prompts, max_new_tokens=max_new_tokens)]


def exact_level_rates(
    model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, prompts: Sequence[Prompt], max_new_tokens: int
) -> dict[int, float]:
    """`exact_prompt_rates` averaged per level."""
    rates = exact_prompt_rates(model, tokenizer, prompts, max_new_tokens)
    return level_means(list(zip(prompts, rates, strict=True)))


def main(argv: list[str] | None = None) -> int:
    """`python -m reinforce_ada.training.warm_start TASK [--ship]`: train a task's default warm start (module doc)."""
    import argparse

    from reinforce_ada.training.warm_tasks import WARM_TASKS, default_configs

    p = argparse.ArgumentParser(prog="python -m reinforce_ada.training.warm_start", description=main.__doc__)
    p.add_argument("task", choices=sorted(WARM_TASKS), help="which task's default warm start to train")
    p.add_argument("--cache-dir", type=Path, default=None, help="where to write it (default: the user cache)")
    p.add_argument("--ship", action="store_true", help="then copy it over the package's shipped folder")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # the shipped weights were trained on one thread: reductions in the same order
    task_cfg, model_cfg, sft_cfg = default_configs(args.task)
    folder = warm_start(task_cfg, model_cfg, sft_cfg, cache_dir=args.cache_dir, shipped=False)
    info = warm_start_info(folder)
    print(f"{folder}: trained {info['steps']} steps in {info['train_seconds']} s")
    print("exact pass rates: " + " ".join(f"L{k}={v:.3f}" for k, v in info["exact_pass_rates"].items()))
    if args.ship:
        dest = WARM_TASKS[args.task].shipped_dir
        dest.mkdir(parents=True, exist_ok=True)

        for f in sorted(folder.iterdir()):
            if f.name != INFO_FILE:
                shutil.copyfile(f, dest / f.name)
        shutil.copyfile(folder / INFO_FILE, dest / INFO_FILE)  # last: a folder with it is complete
        print(f"shipped: {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
