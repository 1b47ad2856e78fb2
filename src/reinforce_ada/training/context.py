"""Prompts that fit the model, and a batch that fits the prompts: what the trainer checks once the model and task
are loaded.

1) A prompt is never cut (cutting changes the question); one whose tokens plus `generation.max_new_tokens` exceed
   the model's context is left out of the pool at start, with a warning and a count in the step-0 metrics
   (`fit_splits`).
2) The embedded model reads only its characters (`models.tiny.CHARS`, after `<bos>`): a file of prompts it can read
   trains it, one with any other character is refused, naming the character and `--model.path` (`embedded_fits`).
3) A step takes each prompt at most once, so `run.batch_size` above the pool's size trains the whole pool per step:
   said once, and the run records the batch it trains (`fit_batch`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

MAX_PROMPT_TOKENS = 32_768
"""Prompt-token limit for a model that states no context length (`max_position_embeddings`)."""


def context_limit(model: Any, max_new_tokens: int) -> int:
    """The longest prompt, in tokens, that leaves room for `max_new_tokens` in the model's context."""
    config = getattr(model, "config", None)
    context = getattr(config, "max_position_embeddings", None) or MAX_PROMPT_TOKENS + max_new_tokens
    return max(int(context) - max_new_tokens, 0)


def fit_context(prompts: list[Prompt], tokenizer: Any, limit: int) -> tuple[list[Prompt], list[str]]:
    """(prompts whose token count is at most `limit`, ids of the others). A prompt is never cut: cutting would change
    the question. The UTF-8 length bounds the token count from above (byte-level BPE, SentencePiece with byte
    fallback and character tokenizers all cover at least one byte per token), so only prompts longer than `limit`
    bytes are tokenized."""
    kept, dropped = [], []
    for p in prompts:
        if len(p.text.encode()) > limit and len(tokenizer(p.text, add_special_tokens=False)["input_ids"]) > limit:
            dropped.append(p.id)
        else:
            kept.append(p)
    return kept, dropped


METRICS: dict[str, str] = {
    "prompts_too_long_train": "At step 0: training prompts left out, too long for the context with max_new_tokens.",
    "prompts_too_long_eval": "At step 0: held-out prompts left out, too long for the context with max_new_tokens.",
}
"""The step-0 keys `fit_splits` returns (docs/metrics.md)."""


def fit_splits(
    train: list[Prompt], eval_: list[Prompt], tokenizer: Any, model: Any, max_new_tokens: int
) -> tuple[list[Prompt], list[Prompt], dict[str, int]]:
    """The train and eval prompts that fit the model's context with `max_new_tokens`, and the step-0 metrics
    `prompts_too_long_train` / `prompts_too_long_eval`. Prints a warning naming the first left-out prompt of each
    split; a run none of whose training prompts fit is a ConfigError."""
    limit = context_limit(model, max_new_tokens)
    fitted, too_long = {}, {}
    for split, prompts in (("train", train), ("eval", eval_)):
        kept, dropped = fit_context(prompts, tokenizer, limit)
        if dropped:
            print(
                f"warning: {len(dropped)} of {len(kept) + len(dropped)} {split} prompts are longer than the model "
                f"can take with generation.max_new_tokens={max_new_tokens} ({limit} prompt "
                f"tokens); they are left out (first: {dropped[0]!r})"
            )
        if split == "train" and not kept:
            raise ConfigError(
                f"every training prompt is longer than {limit} tokens (the model's context minus "
                "generation.max_new_tokens); shorten the prompts or lower generation.max_new_tokens"
            )
        fitted[split] = kept
        too_long[f"prompts_too_long_{split}"] = len(dropped)
    return fitted["train"], fitted["eval"], too_long


def embedded_fits(prompts: list[Prompt], where: str) -> None:
    """Refuse a prompt with a character the embedded model cannot read (its tokenizer would read an unknown token,
    never seen in training), naming the first one and the flag that gives a model of your own; say how many prompts
    lack the `<bos>` the model was warm-started after (they score about 0)."""
    from reinforce_ada.models.tiny import BOS, CHARS, SPECIAL_TOKENS

    for p in prompts:
        text = p.text
        for token in SPECIAL_TOKENS:
            text = text.replace(token, "")
        if bad := sorted(set(text) - set(CHARS)):
            raise ConfigError(
                f"{where}: prompt {p.id!r} ({p.text[:40]!r}) holds {''.join(bad)[:20]!r}, which the embedded model "
                f"cannot read: it is a character-level arithmetic model (digits, {' '.join('+-*=')}, space and newline "
                "after <bos>). Give a model of your own with --model.path FOLDER (e.g. `reinforce-ada models smollm2 "
                "--out models/smollm2`), or prompts written as the built-in task writes them (<bos>18+73=)"
            )
    if missing := sum(not p.text.startswith(BOS) for p in prompts):
        print(
            f"note: {missing} of {len(prompts)} prompts of {where} do not begin with {BOS}, the token the embedded "
            f"model was warm-started after ({BOS}18+73=); without it they score about 0",
            file=sys.stderr,
        )


def fit_batch(cfg: Any, pool: int) -> Any:
    """`cfg` with `run.batch_size` at most `pool` training prompts (module docstring, 3), with a note when it is cut."""
    if cfg.run.batch_size <= pool:
        return cfg
    print(
        f"note: run.batch_size={cfg.run.batch_size} is more than the {pool} training prompts; each step trains all "
        f"{pool} of them, and the run records run.batch_size = {pool} (config.toml)",
        file=sys.stderr,
    )
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, batch_size=pool))
