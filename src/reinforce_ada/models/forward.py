"""The policy's side of training: per-token log-probs of completions under a HF causal LM.

1) One forward over `[left-padded prompt | right-padded completion]`. Every completion starts at the same column
   (the longest prompt's length), so the log-probs come out left-aligned, `logp_BT[b, t]` being completion token `t`
   of row `b`: the layout of `Sample.logprobs` padded on the right with `right_pad`, ready for the PPO ratio.
2) position_ids = cumsum(attention_mask) - 1, so a left-padded row sees the same positions as it would alone. This
   is the layout `HFEngine` samples in, which keeps the sampler's and the trainer's log-probs numerically close.
3) Log-probs are taken under `log_softmax(logits / temperature)`, the distribution the engine samples from before
   top-k/top-p truncation (see `engines/hf.py`). Only the `T + 1` positions that predict completion tokens go through
   the output head (`logits_to_keep`), which saves a (B, P, V) tensor for long prompts.

`model_forward` hides the two kwarg renames across transformers versions (the KV cache is `cache` from 5.x and
`past_key_values` before; `logits_to_keep` was `num_logits_to_keep` before 4.50), so the engine and the trainer call
any causal LM the same way. The names are read from the causal LM's own `forward`, under any peft wrapper: a
`PeftModel` takes `**kwargs`, so its signature has neither, and passing `past_key_values` through it made
transformers warn on every call that the name goes in 5.40.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from reinforce_ada.errors import ConfigError


@functools.cache
def _forward_kwarg_names(forward_fn: Any) -> tuple[str, str | None]:
    params = inspect.signature(forward_fn).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
    return cache_kw, keep_kw


def _causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a peft wrapper (`PeftModel.get_base_model()`), else `model` itself."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def model_forward(
    model: torch.nn.Module,
    input_ids_BL: torch.Tensor,
    attention_mask_BL: torch.Tensor,
    position_ids_BL: torch.Tensor,
    *,
    kv_cache: Any = None,
    use_cache: bool = False,
    logits_to_keep: int = 0,
) -> tuple[torch.Tensor, Any]:
    """Run a causal LM and return `(logits_BKV, kv_cache)`, K being the last `logits_to_keep` positions (0 = all).

    `attention_mask_BL` covers the cached positions too (length = cached + new), as HF expects.
    """
    cache_kw, keep_kw = _forward_kwarg_names(type(_causal_lm(model)).forward)
    kwargs: dict[str, Any] = {cache_kw: kv_cache, "use_cache": use_cache}
    if keep_kw is not None:
        kwargs[keep_kw] = logits_to_keep
    out = model(input_ids=input_ids_BL, attention_mask=attention_mask_BL, position_ids=position_ids_BL, **kwargs)
    logits = out.logits
    if keep_kw is None and logits_to_keep:
        logits = logits[:, -logits_to_keep:]
    new_cache = out.cache if hasattr(out, "cache") else getattr(out, "past_key_values", None)
    if isinstance(new_cache, tuple):  # transformers < 4.47 hands back the legacy format when given no cache
        from transformers import DynamicCache

        new_cache = DynamicCache.from_legacy_cache(new_cache)
    return logits, new_cache


def position_ids_from_mask(mask_BL: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: cumsum(mask) - 1, clamped at 0 on the pads (whose value is never used)."""
    return (mask_BL.long().cumsum(-1) - 1).clamp(min=0)


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, *, device: torch.device | str = "cpu"):
    """`(ids_BL, mask_BL)`: sequences right-aligned in a (B, max len) long tensor, mask 1 on real tokens."""
    width = max((len(s) for s in seqs), default=0)
    ids_BL = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask_BL = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, s in enumerate(seqs):
        if len(s):
            ids_BL[b, width - len(s) :] = torch.as_tensor(list(s), dtype=torch.long)
            mask_BL[b, width - len(s) :] = 1
    return ids_BL.to(device), mask_BL.to(device)


def right_pad(seqs: Sequence[Sequence[float]], value: float = 0.0, *, dtype=torch.float32, device="cpu"):
    """`(values_BT, mask_BT)`: sequences left-aligned in a (B, max len) tensor, e.g. `Sample.logprobs` -> old_logp_BT.

    The mask is bool.
    """
    width = max((len(s) for s in seqs), default=0)
    values_BT = torch.full((len(seqs), width), value, dtype=dtype)
    mask_BT = torch.zeros((len(seqs), width), dtype=torch.bool)
    for b, s in enumerate(seqs):
        if len(s):
            values_BT[b, : len(s)] = torch.as_tensor(list(s), dtype=dtype)
            mask_BT[b, : len(s)] = True
    return values_BT.to(device), mask_BT.to(device)


def sequence_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    pad_id: int,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs of each completion given its prompt, in one forward pass (with grad unless disabled).

    Returns `(logp_BT, mask_BT, entropy_BT | None)`, all (B, T) with T the longest completion, left-aligned:
    column t is completion token t; `mask_BT` (bool) is False past each completion's end, where logp and entropy
    are 0. logp is under `log_softmax(logits / temperature)` (float32); entropy is that distribution's entropy.
    Run it in micro-batches: the forward materialises (B, T + 1, V) float32 logits.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ConfigError(f"got {len(prompt_ids)} prompts but {len(completion_ids)} completions")
    if temperature <= 0:
        raise ConfigError(f"temperature must be > 0, got {temperature} (greedy samples are scored at 1.0)")
    if any(len(p) == 0 for p in prompt_ids):
        raise ConfigError("every prompt needs at least one token (the first completion token is predicted from it)")
    device = next(model.parameters()).device
    B, T = len(prompt_ids), max((len(c) for c in completion_ids), default=0)
    if T == 0:
        empty = torch.zeros((B, 0), device=device)
        return empty, empty.bool(), (empty if with_entropy else None)

    prompt_BP, prompt_mask_BP = left_pad(prompt_ids, pad_id)
    comp_BT, mask_BT = right_pad(completion_ids, float(pad_id), dtype=torch.long)
    input_ids_BL = torch.cat([prompt_BP, comp_BT], dim=1).to(device)
    attn_BL = torch.cat([prompt_mask_BP, mask_BT.long()], dim=1).to(device)
    comp_BT, mask_BT = comp_BT.to(device), mask_BT.to(device)

    logits_BTV, _ = model_forward(
        model, input_ids_BL, attn_BL, position_ids_from_mask(attn_BL), use_cache=False, logits_to_keep=T + 1
    )
    # the last position predicts past the end of the longest completion
    logits_BTV = logits_BTV[:, :-1].float() / temperature
    logz_BT = torch.logsumexp(logits_BTV, dim=-1)
    logp_BT = logits_BTV.gather(-1, comp_BT.unsqueeze(-1)).squeeze(-1) - logz_BT
    logp_BT = logp_BT.masked_fill(~mask_BT, 0.0)
    entropy_BT = None
    if with_entropy:
        # H = logZ - E_p[logit]: one softmax, no second (B, T, V) log_softmax
        entropy_BT = logz_BT - (F.softmax(logits_BTV, dim=-1) * logits_BTV).sum(-1)
        entropy_BT = entropy_BT.masked_fill(~mask_BT, 0.0)
    return logp_BT, mask_BT, entropy_BT
