"""Continuous batching for any local HF causal LM: `ContinuousEngine` (engines/continuous.py) over HF's forward.

1) The running batch is one left-padded batch over a `DynamicCache`. Admission copies the running cache and the new
   rows' prompt caches into one tensor per layer, left-padded to the longest; padding columns hold zeros with
   attention mask 0, and position_ids count each row's real tokens, so a row sees exactly the positions and keys it
   would see alone (up to float noise).
2) A finished or cancelled row stays in the batch, fed pad with mask 0, until the batch is re-laid out: when queued
   rows can be admitted in a bunch (>= slots / 8 free, or all the queue, or the batch is empty) or when dead rows
   make up an eighth of it. Each re-layout copies the cache; batching them bounds that cost, as `HFEngine` does with
   `DROP_FRACTION`. Leading columns no row attends to are trimmed then.
Queue, tickets, prompt cache, cancel, the weight-version check and sampling are `ContinuousEngine`'s.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from reinforce_ada.engines.continuous import ContinuousEngine, _get_kv, _Row
from reinforce_ada.engines.hf import DROP_FRACTION
from reinforce_ada.models.forward import model_forward
from reinforce_ada.types import Sample


def _set_kv(cache: Any, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    if hasattr(cache, "layers"):
        for layer, (k, v) in zip(cache.layers, kv, strict=True):
            layer.keys, layer.values = k, v
    else:
        cache.key_cache[:] = [k for k, _ in kv]
        cache.value_cache[:] = [v for _, v in kv]


class HFStreamEngine(ContinuousEngine):
    """`ContinuousEngine` with a left-padded `DynamicCache` batch and HF's forward; see the module docstring."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        self.cache: Any = None  # DynamicCache of `rows`; kept (emptied) between batches as the container
        self.mask_RL = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.pos_R = torch.zeros(0, dtype=torch.long, device=self.device)

    # -- the decode loop -----------------------------------------------------------------------------------------
    def _step(self) -> list[Sample]:
        """Sample one token for every live row, retire finished rows, then feed the new tokens through the model."""
        out = self._sample_rows()
        if all(r.dead for r in self.rows):
            self._clear_batch()
            return out
        dead = sum(r.dead for r in self.rows)
        if dead and (dead * DROP_FRACTION >= len(self.rows) or self._admission_due()):
            self._compact()
        live_R = torch.tensor([not r.dead for r in self.rows], device=self.device)
        tok_R = torch.full((len(self.rows),), self.pad_id, dtype=torch.long, device=self.device)
        tok_R[live_R] = torch.tensor([r.tokens[-1] for r in self.rows if not r.dead], device=self.device)
        self.mask_RL = torch.cat([self.mask_RL, live_R.long().unsqueeze(-1)], dim=-1)
        logits_R1V, self.cache = model_forward(
            self.model,
            tok_R.unsqueeze(-1),
            self.mask_RL,
            self.pos_R.unsqueeze(-1),
            kv_cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.logits_RV, self.pos_R = logits_R1V[:, -1], self.pos_R + live_R.long()
        return out

    def _admission_due(self) -> bool:
        """Admit queued rows now? Yes when the batch has no live row, or a bunch of them (>= slots / 8) fit."""
        if not self.queue:
            return False
        alive = sum(not r.dead for r in self.rows)
        n = min(self.slots - alive, len(self.queue))
        return n > 0 and (alive == 0 or n >= min(len(self.queue), max(1, self.slots // DROP_FRACTION)))

    def _maybe_admit(self) -> None:
        if not self._admission_due():
            return
        if any(r.dead for r in self.rows):
            self._compact()
        new = [self.queue.popleft() for _ in range(min(self.slots - len(self.rows), len(self.queue)))]
        cache = self._prefill_prompts(list(dict.fromkeys(r.text for r in new if r.text not in self.prompt_kv)), new)
        if self.cache is None:
            self.cache = cache  # the container the running batch lives in from now on
        self._merge(new)
        self._evict()

    def _merge(self, new: list[_Row]) -> None:
        """Append `new` rows to the running batch, left-padding everything to the longest cache."""
        R, n = len(self.rows), len(new)
        L_old = self.mask_RL.shape[1] if R else 0
        L = max(L_old, max(len(r.ids) for r in new))
        by_text: dict[str, list[int]] = defaultdict(list)
        for j, r in enumerate(new):
            by_text[r.text].append(R + j)
            self.prompt_kv.move_to_end(r.text)
        mask_RL = torch.zeros((R + n, L), dtype=torch.long, device=self.device)
        if R:
            mask_RL[:R, L - L_old :] = self.mask_RL
        old = _get_kv(self.cache) if R else []
        merged = []
        _, _, G, _, D = self.prompt_kv[new[0].text].kv_L2GPD.shape
        rows_of = {text: torch.tensor(idx, device=self.device) for text, idx in by_text.items()}
        for layer in range(len(self.prompt_kv[new[0].text].kv_L2GPD)):
            k, v = (self.prompt_kv[new[0].text].kv_L2GPD.new_zeros((R + n, G, L, D)) for _ in range(2))
            if R:
                k[:R, :, L - L_old :], v[:R, :, L - L_old :] = old[layer]
            for text, rows_N in rows_of.items():
                pk, pv = self.prompt_kv[text].kv_L2GPD[layer]
                k[rows_N, :, L - pk.shape[1] :] = pk
                v[rows_N, :, L - pv.shape[1] :] = pv
            merged.append((k, v))
        for j, r in enumerate(new):
            mask_RL[R + j, L - len(r.ids) :] = 1
        _set_kv(self.cache, merged)
        new_logits = torch.stack([self.prompt_kv[r.text].logits_V for r in new])
        self.logits_RV = torch.cat([self.logits_RV, new_logits]) if R else new_logits
        self.pos_R = torch.cat([self.pos_R, torch.tensor([len(r.ids) for r in new], device=self.device)])
        self.mask_RL, self.rows = mask_RL, self.rows + new

    def _compact(self) -> None:
        """Drop dead rows from the batch and trim leading columns that no remaining row attends to."""
        keep = [i for i, r in enumerate(self.rows) if not r.dead]
        if not keep:
            self._clear_batch()
            return
        idx_R = torch.tensor(keep, device=self.device)
        first = int(self.mask_RL[idx_R].any(dim=0).long().argmax())
        _set_kv(self.cache, [(k[idx_R, :, first:], v[idx_R, :, first:]) for k, v in _get_kv(self.cache)])
        self.mask_RL = self.mask_RL[idx_R, first:]
        self.pos_R, self.logits_RV = self.pos_R[idx_R], self.logits_RV[idx_R]  # type: ignore[index]
        self.rows = [self.rows[i] for i in keep]

    def _clear_batch(self) -> None:
        self.rows, self.logits_RV = [], None
        self.mask_RL = self.mask_RL.new_zeros((0, 0))
        self.pos_R = self.pos_R.new_zeros(0)
        if self.cache is not None:
            _set_kv(self.cache, [(k[:0, :, :0], v[:0, :, :0]) for k, v in _get_kv(self.cache)])
