"""A tiny char-level Llama: the CPU testbed's model, built locally (no hub).

1) `build_char_tokenizer()` builds a one-character-per-token tokenizer. Nothing is added to the text automatically:
   task prompts carry the BOS token string themselves (`"<bos>12+34="`), and the target ends with `"<eos>"`, so the
   ids that a test sees are exactly the characters of the string.
2) `build_tiny_llama()` makes a seeded random `LlamaForCausalLM` (0.13M parameters by default).
Its supervised warm start on the arithmetic task is `training.warm_start`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD, EOS, BOS, UNK = "<pad>", "<eos>", "<bos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, BOS, UNK)
"""Ids 0..3, in this order."""
CHARS = "0123456789+-*= \n"
"""Every other token: one character each, ids 4 onward."""
LONG_CHARS = CHARS + ";#"
"""The running-sums model's characters (`tasks.running_sums`: `;` ends a step, `#` marks the result): `CHARS` then
two more ids (20, 21), so every id of `CHARS` is unchanged; the arithmetic model keeps `CHARS` (its vocabulary, and so
its weights' shape and its random init, stay as shipped)."""


def build_char_tokenizer(
    vocab_size: int | None = None, max_length: int = 64, chars: str = CHARS
) -> PreTrainedTokenizerFast:
    """A char-level tokenizer: `<pad>`=0, `<eos>`=1, `<bos>`=2, `<unk>`=3, then one id per character of `chars`
    (`CHARS`, or `LONG_CHARS` for the running-sums model).

    `vocab_size` pads the vocabulary with filler tokens `<tN>` (never produced by encoding; they decode as `<tN>`),
    so a model of a real vocabulary's shape can be driven with the same ids (`benchmarks/gpu_check.py`).

    Special tokens are written into the text (`"<bos>1+2=3<eos>"`) and are never added by `encode`; unknown
    characters map to `<unk>`. Left padding, as batched generation needs.

    >>> tok = build_char_tokenizer()
    >>> tok.encode("<bos>12+3=")
    [2, 5, 6, 14, 7, 17]
    >>> tok.decode([2, 5, 6, 14, 7, 17, 1], skip_special_tokens=True)
    '12+3='
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    if not chars.startswith(CHARS) or len(set(chars)) != len(chars):
        raise ValueError(f"chars must be CHARS ({CHARS!r}) followed by new distinct characters, got {chars!r}")
    base = [*SPECIAL_TOKENS, *chars]
    if vocab_size is not None and vocab_size < len(base):
        raise ValueError(f"vocab_size={vocab_size} must be >= {len(base)} (the char tokenizer's own ids)")
    fillers = [f"<t{i}>" for i in range(len(base), vocab_size or len(base))]
    vocab = {t: i for i, t in enumerate(base + fillers)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # every character is its own "word"; [\s\S] because Oniguruma's `.` skips the newline
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()  # join the pieces with nothing in between (the default joins with spaces)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=BOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=max_length,
    )


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny Llama (the probe's model "S" by default)."""

    hidden_size: int = 64
    """Width of the residual stream."""
    num_layers: int = 2
    """Decoder layers."""
    num_heads: int = 2
    """Attention heads (also the key/value heads: no grouped-query attention)."""
    intermediate_size: int = 256
    """Width of the MLP."""
    max_position: int = 64
    """Longest sequence, prompt plus completion, in tokens."""
    tie_embeddings: bool = True
    """Share the input embedding with the output head."""
    attn_implementation: str = "sdpa"
    """Attention kernel passed to transformers (`sdpa` or `eager`)."""
    init_seed: int = 0
    """Seed for the random initial weights."""

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_position"):
            if getattr(self, name) < 1:
                raise ValueError(f"TinyModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"TinyModelConfig.hidden_size ({self.hidden_size}) must be a multiple of num_heads ({self.num_heads})"
            )
        if self.attn_implementation not in ("sdpa", "eager"):
            raise ValueError(
                f"TinyModelConfig.attn_implementation must be 'sdpa' or 'eager', got {self.attn_implementation!r}"
            )


def build_tiny_llama(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A randomly initialised `LlamaForCausalLM` sized by `cfg`, seeded by `cfg.init_seed`, in train mode on CPU."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_position,
        tie_word_embeddings=cfg.tie_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config._attn_implementation = cfg.attn_implementation
    # fork_rng: seeding must not disturb the caller's global generator
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.init_seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model
