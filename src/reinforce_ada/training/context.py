"""Prompts that fit the model: the longest prompt a run may send, and the rule that leaves longer ones out.

A prompt is never cut (cutting changes the question); one whose tokens plus `generation.max_new_tokens` exceed the
model's context is left out of the pool at start, with a warning and a count in the step-0 metrics.
"""

from __future__ import annotations

from typing import Any

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
