"""Continuous batching over a static, slot-indexed KV cache with a fused decode step, for Llama-family models.

`HFStreamEngine` (engines/hf_stream.py) works with any HF causal LM but pays for generality on every decode step:
HF's forward (mask building, cache objects, output capture) and a KV cache that grows by concatenation and is
copied whenever rows join or leave. `SlotEngine` shares the queue, tickets, prompt cache, cancel, weight-version
check and sampler (`ContinuousEngine`, engines/continuous.py) and brings its own batch layout and decode step:
1) One preallocated buffer `(layers, 2, rows, kv_heads, capacity, head_dim)` holds the running rows' keys and
   values, row r's token t at `[layer, k|v, r, :, t]`, no padding. Live rows occupy slots `0..A-1`; a finished or
   cancelled row's slot is refilled by moving the last live row into it (one row copied, not the batch). A row
   joins by copying its prompt's KV (prefilled once per distinct prompt by HF's own forward) into a free slot.
   `capacity` = longest admitted prompt + `max_new_tokens`; `rows` doubles, up to `slots`, as rows are admitted;
   the buffer grows (one copy) when either is exceeded. Memory: 4 bytes (fp32) x 2 x layers x kv_heads x head_dim
   per row and position -- 46 KB for SmolLM2-135M, so 64 rows of 100 + 256 tokens take 1.0 GiB.
2) The decode step calls the model's own submodules -- embedding, rotary embedding, norms, q/k/v/o projections
   (LoRA-wrapped or not), MLP, LM head -- and does only the attention itself: the new key/value are written at each
   row's position, and SDPA runs over `[:A, :, :max position + 1]` with a per-row length mask. Same maths as HF's
   forward (greedy output and log-probs are tested against it); the speed-up is the overhead HF's forward spends
   around those modules (measured in BENCHMARKS.md).
3) Admission is immediate whenever a slot is free (there is no re-layout to amortise).
Supported: `model_type` in `FUSED_MODEL_TYPES` (Llama, Mistral, Qwen2, Qwen3) with full attention in every layer;
`supports_fused(model)` says whether a model qualifies and `why_not_fused` why not. Everything else uses
`HFStreamEngine`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
import torch.nn.functional as F

from reinforce_ada.engines.continuous import ContinuousEngine, _Row
from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Sample

FUSED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


def _causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The `*ForCausalLM` under a peft wrapper, if any."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def why_not_fused(model: torch.nn.Module) -> str | None:
    """None if `SlotEngine` can run `model`, else the reason."""
    lm = _causal_lm(model)
    cfg = getattr(lm, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in FUSED_MODEL_TYPES:
        return f"model_type {kind!r} is not one of {list(FUSED_MODEL_TYPES)}"
    inner = getattr(lm, "model", None)
    if not all(hasattr(inner, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")) or not hasattr(
        lm, "lm_head"
    ):
        return f"{type(lm).__name__} does not have the Llama module layout"
    types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    if types != {"full_attention"} or (
        getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True)
    ):
        return "sliding-window attention layers"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp != 1"
    return None


def supports_fused(model: torch.nn.Module) -> bool:
    return why_not_fused(model) is None


class SlotEngine(ContinuousEngine):
    """A `StreamingEngine` (and `generate`) with a static slot KV cache and a fused decode step; see the docstring.

    Takes `ContinuousEngine`'s arguments. Raises `ConfigError` for a model `supports_fused` rejects.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, **kwargs: Any) -> None:
        reason = why_not_fused(model)
        if reason is not None:
            raise ConfigError(f"SlotEngine cannot run this model: {reason}; use HFStreamEngine")
        super().__init__(model, tokenizer, **kwargs)
        lm = _causal_lm(model)
        self._lm, self._inner = lm, lm.model
        cfg = lm.config
        self._heads = cfg.num_attention_heads
        self._kv_heads = getattr(cfg, "num_key_value_heads", None) or self._heads
        self._head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self._heads
        self.kv: torch.Tensor | None = None
        """Keys (index 0) and values (1) of the running rows: (layers, 2, rows, kv heads, capacity, head dim)."""
        self.pos_A = torch.zeros(0, dtype=torch.long, device=self.device)
        """Per live row: the position of its next token = tokens in its KV cache."""

    # -- the batch layout ----------------------------------------------------------------------------------------
    def _admission_due(self) -> bool:
        return bool(self.queue) and len(self.rows) < self.slots

    def _maybe_admit(self) -> None:
        if self.rows and any(r.dead for r in self.rows):
            self._compact()
        if not self._admission_due():
            return
        new = [self.queue.popleft() for _ in range(min(self.slots - len(self.rows), len(self.queue)))]
        self._prefill_prompts(list(dict.fromkeys(r.text for r in new if r.text not in self.prompt_kv)), new)
        self._merge(new)
        self._evict()

    def _ensure_buffers(self, rows: int, length: int, dtype: torch.dtype) -> None:
        """Grow the KV buffer to hold `rows` rows of `length` positions (rows doubling up to `slots`): memory follows
        the rows actually running, not the slot count."""
        have_rows, have_len = (self.kv.shape[2], self.kv.shape[4]) if self.kv is not None else (0, 0)
        if rows <= have_rows and length <= have_len:
            return
        new_rows = min(self.slots, max(rows, 2 * have_rows)) if rows > have_rows else have_rows
        new_len = max(length, have_len)
        layers = len(self._inner.layers)
        shape = (layers, 2, new_rows, self._kv_heads, new_len, self._head_dim)
        kv = torch.zeros(shape, dtype=dtype, device=self.device)
        if self.kv is not None and self.rows:
            A = len(self.rows)
            kv[:, :, :A, :, :have_len] = self.kv[:, :, :A]
        self.kv = kv

    def _merge(self, new: list[_Row]) -> None:
        A = len(self.rows)
        self._ensure_buffers(
            A + len(new), max(len(r.ids) for r in new) + self.max_new_tokens, self.prompt_kv[new[0].text].kv_L2GPD.dtype
        )
        slots_of: dict[str, list[int]] = defaultdict(list)
        for j, r in enumerate(new):
            slots_of[r.text].append(A + j)
        for text, idx in slots_of.items():  # one copy per distinct prompt, all layers, keys and values
            entry = self.prompt_kv[text]
            self.prompt_kv.move_to_end(text)
            p = entry.kv_L2GPD.shape[3]
            self.kv[:, :, torch.tensor(idx, device=self.device), :, :p] = entry.kv_L2GPD[:, :, None]  # type: ignore[index]
        new_logits = torch.stack([self.prompt_kv[r.text].logits_V for r in new])
        self.logits_RV = torch.cat([self.logits_RV, new_logits]) if A else new_logits
        lengths = torch.tensor([len(r.ids) for r in new], device=self.device)
        self.pos_A = torch.cat([self.pos_A, lengths]) if A else lengths
        self.rows = self.rows + new

    def _compact(self) -> None:
        """Fill dead rows' slots with live rows from the end, so live rows occupy 0..A-1 again."""
        A = len(self.rows)
        live = [i for i, r in enumerate(self.rows) if not r.dead]
        if not live:
            self._clear_batch()
            return
        keep = len(live)
        holes = [i for i in range(keep) if self.rows[i].dead]
        if holes:
            movers = [i for i in range(keep, A) if not self.rows[i].dead]
            dst = torch.tensor(holes, device=self.device)
            src = torch.tensor(movers, device=self.device)
            L = int(self.pos_A[src].max())
            self.kv[:, :, dst, :, :L] = self.kv[:, :, src, :, :L]  # type: ignore[index]
            self.pos_A[dst] = self.pos_A[src]
            self.logits_RV[dst] = self.logits_RV[src]  # type: ignore[index]
            for h, m in zip(holes, movers, strict=True):
                self.rows[h] = self.rows[m]
        self.rows = self.rows[:keep]
        self.pos_A, self.logits_RV = self.pos_A[:keep], self.logits_RV[:keep]  # type: ignore[index]

    def _clear_batch(self) -> None:
        self.rows, self.logits_RV = [], None
        self.pos_A = self.pos_A.new_zeros(0)

    # -- the decode step -----------------------------------------------------------------------------------------
    def _step(self) -> list[Sample]:
        out = self._sample_rows()
        if all(r.dead for r in self.rows):
            self._clear_batch()
            return out
        self._compact()
        tok_A = torch.tensor([r.tokens[-1] for r in self.rows], device=self.device)
        self.logits_RV = self._forward(tok_A)
        self.pos_A = self.pos_A + 1
        return out

    def _forward(self, tok_A: torch.Tensor) -> torch.Tensor:
        """Feed one token per live row at its position; write its K/V into the slot buffers; return logits_AV."""
        A, H, G, D = len(tok_A), self._heads, self._kv_heads, self._head_dim
        pos_A, inner = self.pos_A, self._inner
        L = int(pos_A.max()) + 1
        x = inner.embed_tokens(tok_A)[:, None]  # (A, 1, hidden)
        cos, sin = inner.rotary_emb(x, pos_A[:, None])
        cos, sin = cos[:, None], sin[:, None]  # broadcast over heads: (A, 1, 1, D)
        mask_A11L = (torch.arange(L, device=self.device)[None, :] <= pos_A[:, None])[:, None, None, :]
        rows_A = torch.arange(A, device=self.device)
        for i, layer in enumerate(inner.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(A, 1, H, D)
            k = attn.k_proj(h).view(A, 1, G, D)
            v = attn.v_proj(h).view(A, G, D)
            if hasattr(attn, "q_norm"):  # Qwen3: per-head RMSNorm before RoPE
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            keys, values = self.kv[i, 0], self.kv[i, 1]  # type: ignore[index]
            keys[rows_A, :, pos_A] = k[:, :, 0]
            values[rows_A, :, pos_A] = v
            o = F.scaled_dot_product_attention(
                q,
                keys[:A, :, :L],
                values[:A, :, :L],
                attn_mask=mask_A11L,
                scale=attn.scaling,
                enable_gqa=G != H,
            )
            x = x + attn.o_proj(o.transpose(1, 2).reshape(A, 1, H * D))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self._lm.lm_head(inner.norm(x))[:, 0]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
