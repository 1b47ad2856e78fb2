"""Shared fixtures: the char-level tokenizer, a tiny random Llama on CPU and that model saved as a folder
(session-scoped: do not mutate them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from reinforce_ada.models.tiny import build_char_tokenizer

# tensors here are tiny: extra threads only add overhead (and the CI box is shared)
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def char_tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama(char_tokenizer) -> LlamaForCausalLM:
    """A seeded random Llama (hidden 32, 2 layers, 2 heads, tied embeddings), in eval mode."""
    tok = char_tokenizer
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
        # at the default 0.02 the tied embedding makes the model echo its last input token forever; 0.5 gives varied
        # completions, some of which end in EOS
        initializer_range=0.5,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model.eval()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tiny_llama, char_tokenizer) -> Path:
    """`tiny_llama` and its tokenizer saved as a Hugging Face folder (what `model.path` takes)."""
    d = tmp_path_factory.mktemp("tiny_model")
    tiny_llama.save_pretrained(d)
    char_tokenizer.save_pretrained(d)
    return d
