"""The policy's own view of a prompt, from one prefill: its last hidden state, and how sure it is of its first token.

What a learned difficulty predictor can read besides the prompt's text (`sampling.memory.predictor`, `Prompt.meta
["features"]`): the hidden state from which the policy starts answering. One forward over the prompt (a prefill, no
sampling), batched; `first_token_confidence` reads the same forward's next-token distribution (entropy, top
log-probability), `prompt_features` returns both. Rows are left-padded with position ids from the mask, as the
engines sample, so a row's features do not depend on its batch. `standardise` z-scores each dimension over the given
prompts and scales the rows to about unit norm, the scale of the predictor's hashed text features (its Newton step
divides by |x|^2, so one part must not swamp the other).
Where it comes from: difficulty probes on LLM hidden states (e.g. VIP 2602.01601's predicted pass rates); the choice of
layer and token is ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from reinforce_ada.cpu_load import usable_memory
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import model_forward, position_ids_from_mask
from reinforce_ada.types import Prompt


def prompt_hidden_states(
    model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt], *, batch_size: int = 64
) -> np.ndarray:
    """(len(prompts), hidden) float64: the last layer's hidden state (the output head's input) at each prompt's
    last token."""
    return _prompt_last(model, tokenizer, prompts, batch_size)[0]


def first_token_confidence(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    *,
    batch_size: int = 64,
    temperature: float = 1.0,
) -> np.ndarray:
    """(len(prompts), 2) float64: the entropy (nats) and the log of the top probability of the policy's first
    completion token at `temperature` -- how sure the policy is of how to start, from the same single prefill."""
    check_temperature(temperature)
    return _prompt_last(model, tokenizer, prompts, batch_size, temperature)[1]


def prompt_features(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    *,
    batch_size: int = 64,
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Both of the above from one prefill per prompt: (hidden states, confidence)."""
    check_temperature(temperature)
    return _prompt_last(model, tokenizer, prompts, batch_size, temperature)


def check_temperature(temperature: float) -> None:
    """A finite temperature > 0: at inf every token is equally likely, so the confidence reads nothing."""
    if not (math.isfinite(temperature) and temperature > 0):
        raise ConfigError(f"temperature must be a finite number > 0, got {temperature}")


ATTENTION_BYTES = 4
"""Bytes of one attention score (fp32): a prefill of T tokens holds heads x T x T of them per row."""


def check_lengths(model: Any, prompts: Sequence[Prompt], ids: Sequence[Sequence[int]], batch_size: int) -> None:
    """Refuse, before the first forward, a prompt longer than the model's context (`max_position_embeddings`) and a
    batch whose attention scores would not fit in the memory this process can get (a 30,000-character prompt used to
    end in a MemoryError after minutes), naming the prompt, its tokens and what to change."""
    if not ids:
        return
    longest = max(range(len(ids)), key=lambda i: len(ids[i]))
    n = len(ids[longest])
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and n > context:
        raise ConfigError(
            f"prompt {prompts[longest].id!r} has {n} tokens; the model reads at most {context} "
            "(max_position_embeddings): drop or shorten it (the trainer leaves such prompts out)"
        )
    heads = getattr(getattr(model, "config", None), "num_attention_heads", None) or 1
    per_row = heads * n * n * ATTENTION_BYTES
    memory = usable_memory()
    if min(batch_size, len(ids)) * per_row > memory:
        fits = memory // per_row
        fix = f"--batch-size {fits}" if fits >= 1 else "drop or shorten it"
        raise ConfigError(
            f"prompt {prompts[longest].id!r} has {n} tokens: a batch of {min(batch_size, len(ids))} needs about "
            f"{min(batch_size, len(ids)) * per_row / 2**30:.1f} GiB of attention scores, more than the "
            f"{memory / 2**30:.1f} GiB this process can get; {fix}"
        )


@torch.no_grad()
def _prompt_last(
    model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt], batch_size: int, temperature: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """One prefill per batch, left-padded with position ids from the mask (the engines' layout), so every row's last
    token is the last column: only that column goes through the output head (`logits_to_keep=1`), and the head's
    input there, caught by a hook, is the final hidden state. No (B, T, V) logits, no per-layer states, no cache."""
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ConfigError("prompt features need a tokenizer with a pad or EOS token")
    head = model.get_output_embeddings()
    if head is None:
        raise ConfigError(f"{type(model).__name__} has no output head (get_output_embeddings() is None)")
    caught: list[torch.Tensor] = []
    hook = head.register_forward_pre_hook(lambda _module, args: caught.append(args[0][:, -1]))
    device = next(model.parameters()).device
    hidden: list[np.ndarray] = []
    confidence: list[np.ndarray] = []
    was_training = model.training
    model.eval()
    all_ids = tokenizer([p.text for p in prompts], add_special_tokens=False)["input_ids"] if prompts else []
    check_lengths(model, prompts, all_ids, batch_size)
    try:
        for lo in range(0, len(prompts), batch_size):
            batch = prompts[lo : lo + batch_size]
            ids = all_ids[lo : lo + batch_size]
            empty = [p.id for p, x in zip(batch, ids, strict=True) if not x]
            if empty:
                raise ConfigError(f"prompt {empty[0]!r} has no tokens; a hidden state needs at least one")
            width = max(map(len, ids))
            input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
            mask = torch.zeros((len(ids), width), dtype=torch.long)
            for i, x in enumerate(ids):
                input_ids[i, width - len(x) :] = torch.tensor(x)
                mask[i, width - len(x) :] = 1
            caught.clear()
            logits, _ = model_forward(
                model,
                input_ids.to(device),
                mask.to(device),
                position_ids_from_mask(mask).to(device),
                logits_to_keep=1,
            )
            hidden.append(caught[-1].double().cpu().numpy())
            logp = torch.log_softmax(logits[:, -1].double() / temperature, dim=-1)
            entropy = -(logp.exp() * logp).sum(-1)
            confidence.append(torch.stack([entropy, logp.max(-1).values], dim=-1).cpu().numpy())
    finally:
        hook.remove()
        model.train(was_training)
    if not hidden:
        return np.zeros((0, 0)), np.zeros((0, 2))
    return np.concatenate(hidden), np.concatenate(confidence)


def standardise(x: np.ndarray) -> np.ndarray:
    """Each column z-scored over the rows (a constant column becomes 0), then divided by sqrt(columns)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or not len(x):
        raise ConfigError(f"standardise needs a non-empty (rows, columns) array, got shape {x.shape}")
    sd = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return z / np.sqrt(x.shape[1])
