"""Tiny local model, tokenizer and prompt sets for the TRL integration tests (no hub): a fresh model each call, since
training changes it."""

from __future__ import annotations

import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM

from reinforce_ada.models.tiny import build_char_tokenizer


def tiny_model_and_tokenizer(seed: int = 0):
    """The conftest's tiny random Llama (hidden 32, 2 layers) and the char tokenizer."""
    tok = build_char_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        initializer_range=0.5,  # varied completions, some ending in EOS (see tests/conftest.py)
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, tok


def tiny_prompts(n: int = 16) -> Dataset:
    """Plain-text prompts with an `answer` column (the reward functions receive it as a keyword)."""
    return Dataset.from_dict({"prompt": [f"<bos>{i}+{i}=" for i in range(n)], "answer": [str(2 * i) for i in range(n)]})


def even_length(completions, **kwargs) -> list[float]:
    """A reward a random policy earns about half the time: completions of even length (TRL's signature)."""
    return [float(len(c) % 2 == 0) for c in completions]
