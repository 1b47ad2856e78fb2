"""`benchmarks.gpu_check`'s model shapes, settings and the random model and tokenizer it measures on."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

SHAPES: dict[str, dict[str, Any]] = {
    "smollm2-135m": dict(
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        vocab_size=49152,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    ),
    "smollm2-1.7b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=49152,
        max_position_embeddings=8192,
        rope_theta=130000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    ),
}
"""Llama shapes (SmolLM2's from their config.json; `tiny` for the CPU smoke test, with grouped-query attention)."""
RATES = (0.05, 0.1, 0.25, 0.5, 0.75)
"""Pass rates of `synthetic_reward`'s prompts, one per answer hash bucket."""
TRAIN_ARMS: dict[str, tuple[str, bool]] = {
    "grpo-n4": ("grpo-n4", False),
    "seq-bal streaming": ("seq-bal streaming", False),
    "seq-bal round": ("seq-bal round", False),
    "grpo-n4 bf16": ("grpo-n4", True),
    "seq-bal streaming bf16": ("seq-bal streaming", True),
}
"""Arm -> (`step_time.ARMS` entry, `model.bf16`)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    shape: str = "smollm2-135m"
    workloads: tuple[tuple[str, int, int], ...] = (("grpo-like", 64, 4), ("seq-like", 64, 8))
    """Generation: (name, prompts, samples per prompt)."""
    max_new_tokens: int = 64
    """Generation: completion length (rows rarely end early, see the docstring)."""
    repeats: int = 5
    """Generation: timed calls per side, after one warm-up call each."""
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    train_batch: int = 32
    """Training: prompts per step."""
    train_max_new_tokens: int = 32
    warmup_steps: int = 2
    steps: int = 4
    """Training: timed steps per arm (interleaved across arms)."""
    big_shape: str = "smollm2-1.7b"
    big_repeats: int = 3
    threads: int = 4
    """torch CPU threads."""
    budget_s: float = 420.0
    """Sections that would start after this many seconds are skipped (recorded), so the run ends in its limit."""


TINY = Settings(
    shape="tiny",
    workloads=(("grpo-like", 4, 2), ("seq-like", 4, 3)),
    max_new_tokens=6,
    repeats=3,
    train_batch=4,
    train_max_new_tokens=6,
    warmup_steps=1,
    steps=2,
    big_shape="tiny",
    big_repeats=3,
    threads=1,
)


def padded_char_tokenizer(vocab_size: int, max_length: int) -> Any:
    """`models.tiny`'s char-level tokenizer (same ids) with filler tokens up to `vocab_size` ids."""
    from reinforce_ada.models.tiny import build_char_tokenizer

    return build_char_tokenizer(vocab_size, max_length)


def random_llama(shape: str, tokenizer: Any, device: torch.device, seed: int = 0) -> Any:
    """A seeded random `LlamaForCausalLM` of `SHAPES[shape]`, built directly on `device`, fp32, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    config = LlamaConfig(**SHAPES[shape], **ids, eos_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), device:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
