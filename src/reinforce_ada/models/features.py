"""The policy's own view of a prompt, from one prefill: its last hidden state, and how sure it is of its first token.

What a learned difficulty predictor can read besides the prompt's text (`sampling.predictor`, `Prompt.meta
["features"]`): the hidden state from which the policy starts answering. One forward over the prompt (a prefill, no
sampling), batched; `first_token_confidence` reads the same forward's next-token distribution (entropy, top
log-probability). Rows are right-padded and read at their own last token, so padding never enters a row (causal
attention). `standardise` z-scores each dimension over the given prompts and scales the rows to about unit norm, the
scale of the predictor's hashed text features (its Newton step divides by |x|^2, so one part must not swamp the other).
Where it comes from: difficulty probes on LLM hidden states (e.g. VIP 2602.01601's predicted pass rates); the choice of
layer and token is ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt


def prompt_hidden_states(
    model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt], *, batch_size: int = 256
) -> np.ndarray:
    """(len(prompts), hidden) float64: the last layer's hidden state at each prompt's last token."""
    return _prompt_last(model, tokenizer, prompts, batch_size, "hidden")


def first_token_confidence(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    *,
    batch_size: int = 256,
    temperature: float = 1.0,
) -> np.ndarray:
    """(len(prompts), 2) float64: the entropy (nats) and the log of the top probability of the policy's first
    completion token at `temperature` -- how sure the policy is of how to start, from the same single prefill."""
    if not temperature > 0:
        raise ConfigError(f"temperature must be > 0, got {temperature}")
    return _prompt_last(model, tokenizer, prompts, batch_size, "confidence", temperature)


@torch.no_grad()
def _prompt_last(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    batch_size: int,
    what: str,
    temperature: float = 1.0,
) -> np.ndarray:
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ConfigError("prompt features need a tokenizer with a pad or EOS token")
    device = next(model.parameters()).device
    rows: list[np.ndarray] = []
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, len(prompts), batch_size):
            batch = prompts[lo : lo + batch_size]
            ids = tokenizer([p.text for p in batch], add_special_tokens=False)["input_ids"]
            empty = [p.id for p, x in zip(batch, ids, strict=True) if not x]
            if empty:
                raise ConfigError(f"prompt {empty[0]!r} has no tokens; a hidden state needs at least one")
            width = max(map(len, ids))
            input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
            mask = torch.zeros((len(ids), width), dtype=torch.long)
            for i, x in enumerate(ids):
                input_ids[i, : len(x)] = torch.tensor(x)
                mask[i, : len(x)] = 1
            out = model(
                input_ids=input_ids.to(device), attention_mask=mask.to(device), output_hidden_states=what == "hidden"
            )
            last = torch.tensor([len(x) - 1 for x in ids], device=device)
            rows_idx = torch.arange(len(ids), device=device)
            if what == "hidden":
                rows.append(out.hidden_states[-1][rows_idx, last].double().cpu().numpy())
            else:
                logp = torch.log_softmax(out.logits[rows_idx, last].double() / temperature, dim=-1)
                entropy = -(logp.exp() * logp).sum(-1)
                rows.append(torch.stack([entropy, logp.max(-1).values], dim=-1).cpu().numpy())
    finally:
        model.train(was_training)
    return np.concatenate(rows) if rows else np.zeros((0, 0))


def standardise(x: np.ndarray) -> np.ndarray:
    """Each column z-scored over the rows (a constant column becomes 0), then divided by sqrt(columns)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or not len(x):
        raise ConfigError(f"standardise needs a non-empty (rows, columns) array, got shape {x.shape}")
    sd = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return z / np.sqrt(x.shape[1])
