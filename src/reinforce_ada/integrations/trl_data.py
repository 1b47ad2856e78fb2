"""What `AdaGRPOTrainer` needs of its `train_dataset`, checked before the first step: a `prompt` column, prompts that
are non-empty text or a non-empty list of chat messages, and at least one generation batch of rows.

Without these checks TRL trained 0 steps without a word on an empty dataset or one with fewer rows than a batch (its
`RepeatSampler` drops an incomplete batch), and a missing column or a None / int / empty prompt surfaced as a
KeyError or TypeError deep inside a step. Iterable datasets (no `__len__`) are checked row by row as they arrive.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.errors import ConfigError


def check_prompt(value: Any, where: str) -> None:
    """A prompt is non-empty text, or a non-empty list of messages (dicts with a `content`), as TRL reads it."""
    if isinstance(value, str):
        if value.strip():
            return
        raise ConfigError(f"{where}: the prompt is empty; every row needs a non-empty prompt")
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        return
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise ConfigError(
        f"{where}: the prompt is {type(value).__name__} {shown}; it must be text or a non-empty list of chat "
        "messages ({'role': ..., 'content': ...})"
    )


def check_columns(dataset: Any) -> None:
    """A map-style dataset: it has a `prompt` column and every prompt is valid (named by row)."""
    if dataset is None:
        raise ConfigError("AdaGRPOTrainer needs a train_dataset with a 'prompt' column")
    columns = getattr(dataset, "column_names", None)
    if columns is not None and "prompt" not in columns:
        raise ConfigError(f"train_dataset has no 'prompt' column; its columns are {sorted(columns)}")
    if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        return  # an iterable dataset: its rows are checked as they arrive
    prompts = dataset["prompt"] if columns is not None else (dataset[i].get("prompt") for i in range(len(dataset)))
    for i, value in enumerate(prompts):
        check_prompt(value, f"train_dataset row {i}")


def check_size(dataset: Any, rows_per_batch: int) -> None:
    """At least one generation batch of rows (TRL's sampler drops an incomplete batch: 0 steps, no error)."""
    if not hasattr(dataset, "__len__"):
        return
    if len(dataset) < rows_per_batch:
        what = "is empty" if len(dataset) == 0 else f"has {len(dataset)} rows"
        raise ConfigError(
            f"train_dataset {what}, fewer than one generation batch of {rows_per_batch} prompts "
            "(generation_batch_size / num_generations): TRL would train 0 steps. Add rows or lower "
            "per_device_train_batch_size / steps_per_generation"
        )
