"""Continuous batching for a local HF causal LM: the `streaming.StreamingEngine` protocol over `HFEngine`'s sampler.

1) `submit` queues one row per sample (FIFO) and returns a ticket per row; nothing runs until `poll`. Each `poll`
   runs decode steps over at most `slots` rows -- until a row finishes (default) or `steps_per_poll` steps -- and
   returns the finished samples with the ticket in `Sample.index`. Sampling, log-probs, EOS, stop strings and
   finish reasons are `HFEngine`'s (see `engines/hf.py`): same `sample_next`, same seeded generator semantics.
2) The running batch is one left-padded batch over a `DynamicCache`. A row joins it with its prompt's KV cache: each
   distinct prompt is prefilled once (one batched forward for the prompts an admission needs) and kept, unpadded, in
   an LRU prompt cache of `max_cached_prompts` entries -- prompts with rows queued or running are evicted last, and
   `cancel` evicts at once. Admission copies the running cache and the new rows' prompt caches into one tensor per
   layer, left-padded to the longest; padding columns hold zeros with attention mask 0, and position_ids count each
   row's real tokens, so a row sees exactly the positions and keys it would see alone (up to float noise).
3) A finished or cancelled row stays in the batch, fed pad with mask 0, until the batch is re-laid out: when queued
   rows can be admitted in a bunch (>= slots / 8 free, or all the queue, or the batch is empty) or when dead rows
   make up an eighth of it. Each re-layout copies the cache; batching them bounds that cost, as `HFEngine` does with
   `DROP_FRACTION`. Leading columns no row attends to are trimmed then.
4) The prompt cache is only valid for the weights it was computed with. Every parameter's in-place version counter
   is checked on `submit` and `poll`: after an optimizer step (or `load_state_dict`) the cache is dropped; if rows are
   still running then, `poll` raises -- their KV caches came from the old weights. Writes through `.data` bypass the
   counter: call `clear_prompt_cache()` after those.
Limits: full-attention KV caches only (no sliding-window or linear-attention layers); one device; the queue is FIFO.
"""

from __future__ import annotations

import time
from collections import OrderedDict, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from reinforce_ada.engines.hf import DROP_FRACTION, HFEngine, sample_next
from reinforce_ada.errors import ConfigError
from reinforce_ada.policy import left_pad, model_forward, position_ids_from_mask
from reinforce_ada.types import Request, Sample


@dataclass
class _Row:
    ticket: int
    prompt_id: str
    text: str
    ids: list[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    dead: bool = False


@dataclass
class _PromptKV:
    kv_L2GPD: torch.Tensor
    """Keys (index 0) and values (1) per layer, kv head, real prompt position and head dim."""
    logits_V: torch.Tensor
    """Next-token logits after the prompt."""


def _get_kv(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        for layer in cache.layers:
            if getattr(layer, "is_sliding", False) or not hasattr(layer, "keys"):
                raise ConfigError(f"HFStreamEngine needs full-attention KV caches; got {type(layer).__name__}")
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def _set_kv(cache: Any, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    if hasattr(cache, "layers"):
        for layer, (k, v) in zip(cache.layers, kv, strict=True):
            layer.keys, layer.values = k, v
    else:
        cache.key_cache[:] = [k for k, _ in kv]
        cache.value_cache[:] = [v for _, v in kv]


class HFStreamEngine(HFEngine):
    """A `StreamingEngine` with `slots` decode slots; also `generate(requests)` (submit, then poll until idle).

    Takes `HFEngine`'s sampling arguments (`batch_size` is unused: `slots` is the batch). See the module docstring.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        slots: int = 64,
        steps_per_poll: int | None = None,
        max_cached_prompts: int = 256,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if slots < 1:
            raise ConfigError(f"slots must be >= 1, got {slots}")
        if steps_per_poll is not None and steps_per_poll < 1:
            raise ConfigError(f"steps_per_poll must be >= 1 or None (until a row finishes), got {steps_per_poll}")
        if max_cached_prompts < 1:
            raise ConfigError(f"max_cached_prompts must be >= 1, got {max_cached_prompts}")
        self.slots, self.steps_per_poll, self.max_cached_prompts = slots, steps_per_poll, max_cached_prompts
        self.queue: deque[_Row] = deque()
        self.rows: list[_Row] = []
        """The running batch, one entry per batch row (dead rows ride along until the next re-layout)."""
        self.cache: Any = None  # DynamicCache of `rows`; kept (emptied) between batches as the container
        self.mask_RL = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.pos_R = torch.zeros(0, dtype=torch.long, device=self.device)
        self.logits_RV: torch.Tensor | None = None
        self.prompt_kv: OrderedDict[str, _PromptKV] = OrderedDict()
        self.refs: dict[str, int] = defaultdict(int)
        """Rows queued or running per prompt text."""
        self.next_ticket = 0
        self.prefilled_prompts = 0
        """Prompts prefilled so far (a prompt prefilled twice counts twice): the prompt cache's misses."""
        self.wasted_tokens = 0
        """Tokens decoded for rows later cancelled."""
        self._ids_of: dict[str, list[int]] = {}
        self._weights = self._weights_version()

    @classmethod
    def from_engine(cls, engine: HFEngine, **kwargs: Any) -> HFStreamEngine:
        """A streaming engine with `engine`'s model, tokenizer and sampling settings (a fresh generator)."""
        base = dict(
            max_new_tokens=engine.max_new_tokens,
            temperature=engine.temperature,
            top_p=engine.top_p,
            top_k=engine.top_k,
            stop=engine.stop,
            seed=engine.seed,
            eos_token_ids=engine.eos_token_ids,
        )
        return cls(engine.model, engine.tokenizer, **{**base, **kwargs})

    # -- the StreamingEngine protocol ----------------------------------------------------------------------------
    def submit(self, requests: Sequence[Request]) -> list[int]:
        self._check_weights()
        needed = list(dict.fromkeys(r.prompt.text for r in requests if r.k > 0))
        texts = [t for t in needed if t not in self._ids_of]
        if texts:  # a prompt is re-submitted every batch of a step: tokenise it once
            if len(self._ids_of) + len(texts) > 4 * self.max_cached_prompts:
                self._ids_of = {t: self._ids_of[t] for t in needed if t in self._ids_of}
            self._ids_of.update(zip(texts, self.tokenizer(texts, add_special_tokens=False)["input_ids"], strict=True))
        ids_of = self._ids_of
        for r in requests:
            if r.k > 0 and not ids_of[r.prompt.text]:
                raise ConfigError(f"prompt {r.prompt.id!r} tokenises to zero tokens")
        tickets = []
        for r in requests:
            for _ in range(r.k):
                self.queue.append(_Row(self.next_ticket, r.prompt.id, r.prompt.text, ids_of[r.prompt.text]))
                self.refs[r.prompt.text] += 1
                tickets.append(self.next_ticket)
                self.next_ticket += 1
        return tickets

    def poll(self) -> list[Sample]:
        if self.idle():
            return []
        start = time.perf_counter()
        self._check_weights()
        out: list[Sample] = []
        with self._inference():
            steps = 0
            while True:
                self._maybe_admit()
                if not self.rows:
                    break
                out += self._step()
                steps += 1
                if (out if self.steps_per_poll is None else steps >= self.steps_per_poll) or self.idle():
                    break
        self.throughput.tokens += sum(s.num_tokens for s in out)
        self.throughput.sequences += len(out)
        self.throughput.seconds += time.perf_counter() - start
        return out

    def cancel(self, prompt_id: str) -> int:
        n = 0
        kept: deque[_Row] = deque()
        for row in self.queue:
            if row.prompt_id == prompt_id:
                self._release(row.text, evict=True)
                n += 1
            else:
                kept.append(row)
        self.queue = kept
        for row in self.rows:
            if row.prompt_id == prompt_id and not row.dead:
                row.dead = True
                self.wasted_tokens += len(row.tokens)
                self._release(row.text, evict=True)
                n += 1
        if self.rows and all(r.dead for r in self.rows):
            self._clear_batch()
        return n

    def idle(self) -> bool:
        return not self.queue and not any(not r.dead for r in self.rows)

    # -- round mode on the same engine ---------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """`Engine.generate`: k samples per request, in request order, `index` 0..k-1 within each request."""
        if not self.idle():
            raise RuntimeError("the engine has streaming work in flight; generate needs it idle")
        tickets = self.submit(requests)
        done: dict[int, Sample] = {}
        while not self.idle():
            done.update((s.index, s) for s in self.poll())
        out = [done[t] for t in tickets]
        j = 0
        for r in requests:
            for i in range(r.k):
                out[j + i].index = i
            j += r.k
        return out

    def clear_prompt_cache(self) -> None:
        self.prompt_kv.clear()

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

    def _sample_rows(self) -> list[Sample]:
        """Draw one token per live row, append it, and retire the rows that finished (marked dead, returned)."""
        alive = [i for i, r in enumerate(self.rows) if not r.dead]
        idx_A = torch.tensor(alive, device=self.device)
        tok_A, lp_A = sample_next(
            self.logits_RV[idx_A],  # type: ignore[index]
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            generator=self.generator,
        )
        eos = set(self.eos_token_ids)
        finished: list[tuple[_Row, str]] = []
        check_stop: list[_Row] = []
        for row, t, lp in zip((self.rows[i] for i in alive), tok_A.tolist(), lp_A.tolist(), strict=True):
            row.tokens.append(t)
            row.logprobs.append(lp)
            if t in eos:
                finished.append((row, "eos"))
            elif self.stop:
                check_stop.append(row)
            elif len(row.tokens) >= self.max_new_tokens:
                finished.append((row, "length"))
        if check_stop:
            tails = self.tokenizer.batch_decode(
                [r.tokens[-self._stop_window :] for r in check_stop], skip_special_tokens=True
            )
            for row, tail in zip(check_stop, tails, strict=True):
                if any(s in tail for s in self.stop):
                    finished.append((row, "stop"))
                elif len(row.tokens) >= self.max_new_tokens:
                    finished.append((row, "length"))
        out = []
        for row, why in finished:
            row.dead = True
            self._release(row.text)
            text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
            text = self._cut_at_stop(text) if why == "stop" else text
            out.append(Sample(row.prompt_id, text, row.tokens, row.logprobs, len(row.tokens), why, index=row.ticket))
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
        self._prefill_prompts(list(dict.fromkeys(r.text for r in new if r.text not in self.prompt_kv)), new)
        self._merge(new)
        self._evict()

    def _prefill_prompts(self, texts: list[str], rows: list[_Row]) -> None:
        """One left-padded forward over the prompts not cached; store each one's unpadded KV and last logits."""
        if not texts:
            return
        ids_of = {r.text: r.ids for r in rows}
        ids_UP, mask_UP = left_pad([ids_of[t] for t in texts], self.pad_id, device=self.device)
        logits_U1V, cache = model_forward(
            self.model, ids_UP, mask_UP, position_ids_from_mask(mask_UP), use_cache=True, logits_to_keep=1
        )
        if self.cache is None:
            self.cache = cache  # the container the running batch lives in from now on
        kv, P = _get_kv(cache), ids_UP.shape[1]
        for u, text in enumerate(texts):
            n = len(ids_of[text])
            self.prompt_kv[text] = _PromptKV(
                torch.stack([torch.stack([k[u, :, P - n :], v[u, :, P - n :]]) for k, v in kv]), logits_U1V[u, -1]
            )
        self.prefilled_prompts += len(texts)

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

    # -- the prompt cache ----------------------------------------------------------------------------------------
    def _release(self, text: str, evict: bool = False) -> None:
        self.refs[text] -= 1
        if self.refs[text] == 0:
            del self.refs[text]
            if evict:  # a cancelled prompt has retired: its next use, if any, is a later step
                self.prompt_kv.pop(text, None)

    def _evict(self) -> None:
        """Trim the prompt cache to `max_cached_prompts`: least recently used unreferenced prompts first."""
        excess = len(self.prompt_kv) - self.max_cached_prompts
        if excess <= 0:
            return
        idle = [t for t in self.prompt_kv if t not in self.refs]
        busy = [t for t in self.prompt_kv if t in self.refs]
        for text in (idle + busy)[:excess]:
            del self.prompt_kv[text]

    def _weights_version(self) -> int:
        return sum(p._version for p in self.model.parameters())

    def _check_weights(self) -> None:
        version = self._weights_version()
        if version == self._weights:
            return
        if any(not r.dead for r in self.rows):
            raise RuntimeError("the model's weights changed while samples were decoding; drain or cancel them first")
        self._weights = version
        self.clear_prompt_cache()
