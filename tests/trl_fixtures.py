"""Tiny local model, tokenizer and prompt sets for the TRL integration tests (no hub): a fresh model each call, since
training changes it."""

from __future__ import annotations

from datasets import Dataset

from reinforce_ada.models.tiny import build_char_tokenizer
from tests import helpers


def tiny_model_and_tokenizer(seed: int = 0):
    """The conftest's tiny random Llama (hidden 32, 2 layers) and the char tokenizer."""
    tok = build_char_tokenizer()
    return helpers.tiny_llama(tok, seed=seed), tok


def tiny_prompts(n: int = 16) -> Dataset:
    """Plain-text prompts with an `answer` column (the reward functions receive it as a keyword)."""
    return Dataset.from_dict({"prompt": [f"<bos>{i}+{i}=" for i in range(n)], "answer": [str(2 * i) for i in range(n)]})


def even_length(completions, **kwargs) -> list[float]:
    """A reward a random policy earns about half the time: completions of even length (TRL's signature)."""
    return [float(len(c) % 2 == 0) for c in completions]
