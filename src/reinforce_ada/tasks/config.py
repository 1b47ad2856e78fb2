"""`[task]`: the prompts, answers and verifier a run trains and evaluates on."""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import option
from reinforce_ada.tasks.arithmetic import ArithmeticConfig
from reinforce_ada.tasks.templates import TEMPLATES


@dataclass(frozen=True)
class TaskConfig:
    name: str = option(
        "arithmetic",
        "A task from the task table (`tasks.registry`; `reinforce-ada train --help` lists them with their "
        "verifiers): arithmetic, file, gsm_symbolic, code, reasoning_gym:<dataset> (docs/reasoning_gym.md), or one "
        "registered with `register_task`.",
    )
    path: str | None = option(
        None, "file task: training prompts: a JSONL, CSV or Parquet file, or a folder saved by `datasets`."
    )
    eval_path: str | None = option(
        None, "file task: held-out prompts; without it, `eval_size` rows of `path` are held out (seeded)."
    )
    prompt_key: str = option("prompt", "file task: column holding the prompt text.")
    answer_key: str = option("answer", "file task: column holding the reference answer.")
    features_key: str = option(
        "features",
        "file task: column holding a numeric vector per prompt for the difficulty predictor "
        '(`estimator=predictor|both` reads it as `Prompt.meta["features"]`; `reinforce-ada features` writes one); '
        "rows without it have none. Empty string: ignore the column.",
    )
    max_prompt_chars: int = option(
        32_000,
        "file task: a row whose prompt is longer than this many characters is an error naming it (prompts longer "
        "than the model's context are also left out at start, counted).",
    )
    verifier: str | None = option(
        None,
        "Verifier name (exact, numeric, numeric_marked, math, arithmetic, running_sums, running_sums_strict, code, "
        "reasoning_gym), "
        "or a function of yours as module:function or path/to/file.py:function; default: the task's own "
        "(arithmetic; running_sums; exact for files; math for gsm_symbolic; code; reasoning_gym).",
    )
    template: str = option(
        "plain",
        "Prompt template for file / gsm_symbolic questions: plain, paper (the paper's boxed-answer prompt) or chat.",
    )
    n_per_template: int = option(
        20, "gsm_symbolic: instances generated per template (train: 80% of templates; held-out: the other 20%)."
    )
    verifier_timeout_s: float | None = option(
        None,
        "Score 0 (and count) a verification that takes longer than this many seconds. None: the built-in "
        "verifiers' own limits (math 5 s in a process, code: the sandbox's limits) and 10 s for a verifier of "
        "yours.",
    )
    sandbox: str = option(
        "auto",
        "code task: the sandbox running model-written code: auto (the first that works), bwrap or unshare. Without "
        "a working one the code verifier refuses to run (it never runs model code unsandboxed).",
    )
    train_size: int = option(4096, "Prompts in the training pool.")
    eval_size: int = option(
        256,
        "Held-out prompts: per level for arithmetic, running_sums, reasoning_gym; file and code without "
        "eval_path, rows of `path` held out (at most half the file, with a warning saying how many); gsm_symbolic, "
        "held-out instances kept (0: all).",
    )
    level_weights: tuple[float, ...] = option(
        ArithmeticConfig().level_weights,
        "Share of the training pool per level (arithmetic: levels 1+1, 2+2, 3+3, 3+4, 4+4, 4+5, 5+5 digits; "
        "reasoning_gym: five weights, one per level, or this default for equal shares; running_sums: 8).",
    )
    seed: int = option(0, "Seed of the train / held-out split.")

    def __post_init__(self) -> None:
        from reinforce_ada.tasks.registry import task_spec

        task_spec(self.name)  # a ConfigError listing the registered tasks
        if self.sandbox not in ("auto", "bwrap", "unshare"):
            raise ConfigError(f"task.sandbox={self.sandbox!r} is not valid; choose one of ['auto', 'bwrap', 'unshare']")
        t = self.verifier_timeout_s
        if t is not None and not (isinstance(t, int | float) and 0 < t < float("inf")):
            raise ConfigError(f"task.verifier_timeout_s={t!r} must be a number of seconds > 0 (or unset)")
        if self.verifier is not None and not self.verifier.strip():
            raise ConfigError("task.verifier is empty; leave it unset for the task's own verifier")
        if self.seed < 0:
            raise ConfigError(f"task.seed={self.seed} must be >= 0")
        if self.max_prompt_chars < 1:
            raise ConfigError(f"task.max_prompt_chars={self.max_prompt_chars} must be >= 1")
        if self.template not in TEMPLATES:
            raise ConfigError(f"task.template={self.template!r} is not valid; choose one of {sorted(TEMPLATES)}")
        if self.name == "file" and not self.path:
            raise ConfigError(
                "task.name='file' needs task.path (a JSONL, CSV or Parquet file, or a saved `datasets` folder, "
                "of prompts and answers)"
            )
        if self.n_per_template < 1:
            raise ConfigError(f"task.n_per_template={self.n_per_template} must be >= 1 (instances per template)")
        if self.train_size < 1 or self.eval_size < 0:
            raise ConfigError("task.train_size must be >= 1 and task.eval_size >= 0")
        if self.name.startswith("reasoning_gym:"):  # generated one by one before the first step: bounded up front
            from reinforce_ada.tasks.reasoning import check_sizes

            check_sizes(self.name.removeprefix("reasoning_gym:"), self.train_size, self.eval_size)
