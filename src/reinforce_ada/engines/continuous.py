"""What both continuous-batching engines share: the `streaming.StreamingEngine` protocol over `HFEngine`'s sampler.

1) `submit` queues one row per sample (FIFO) and returns a ticket per row; nothing runs until `poll`. Each `poll`
   runs decode steps over at most `slots` rows -- until a row finishes (default) or `steps_per_poll` steps -- and
   returns the finished samples with the ticket in `Sample.index`. Sampling, log-probs, EOS, stop strings and
   finish reasons are `HFEngine`'s (see `engines/hf.py`): same `sample_next`, same seeded generator semantics.
2) A row joins the running batch with its prompt's KV cache: each distinct prompt is prefilled once (one batched
   forward for the prompts an admission needs) and kept, unpadded, in an LRU prompt cache of `max_cached_prompts`
   entries -- prompts with rows queued or running are evicted last, and `cancel` evicts at once.
3) The prompt cache is only valid for the weights it was computed with. Whoever changes the weights calls
   `sync_weights(model)` afterwards (the trainer does after every update): it bumps `weights_version` and drops the
   cache. This explicit bump is the contract: writes through `.data` and fused optimizers
   (`torch.optim.AdamW(fused=True)`) update the weights without moving the parameters' in-place version counters.
   Those counters are still checked on `submit` and `poll` as a safety net for ordinary in-place writes
   (`load_state_dict`, `copy_` under no_grad). Either way, if rows are still running the engine raises -- their KV
   caches came from the old weights.
How the running rows' KV caches are laid out and how a decode step runs is the subclass's: `_maybe_admit` (admit
queued rows), `_step` (one decode step: `_sample_rows`, then the forward) and `_clear_batch`.
`HFStreamEngine` (engines/hf_stream.py) uses HF's forward on any causal LM; `SlotEngine` (engines/slots.py) a static
slot buffer and a fused decode step for Llama-family models.
4) A request's own `max_tokens` caps its rows below `max_new_tokens` (a length lever, `sampling.length`); tokens
   decoded for rows cancelled in flight are counted and reported per step (`step_metrics`: `cancelled_tokens`, the
   decode work of an early abort that no sample carries).
Limits: full-attention KV caches only (no sliding-window or linear-attention layers); one device; the queue is FIFO.
"""

from __future__ import annotations

import time
from collections import OrderedDict, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from reinforce_ada.engines.hf import HFEngine, sample_next
from reinforce_ada.engines.protocol import Capabilities, EngineSpec
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import left_pad, model_forward, position_ids_from_mask
from reinforce_ada.sampling.over_stream import generate_over_stream
from reinforce_ada.types import Request, Sample

METRICS: dict[str, str] = {
    "cancelled_tokens": "Only with a continuous-batching engine (streaming): tokens decoded this step for samples "
    "cancelled in flight when their prompt stopped first: decode work the bill pays that no sample carries.",
}
"""The keys `step_metrics` adds to a training line (docs/metrics.md)."""


@dataclass
class _Row:
    ticket: int
    prompt_id: str
    text: str
    ids: list[int]
    max_tokens: int = 1 << 30
    """The row's own cap (its request's `max_tokens`), below the engine's `max_new_tokens`."""
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


class ContinuousEngine(HFEngine):
    """A `StreamingEngine` with `slots` decode slots; also `generate(requests)` (submit, then poll until idle).

    Takes `HFEngine`'s sampling arguments (`batch_size` is unused: `slots` is the batch). See the module docstring;
    subclasses supply the batch layout.
    """

    capabilities: ClassVar[Capabilities] = Capabilities(streaming=True, prompt_cache=True, step_metrics=True)

    @classmethod
    def build(cls, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> ContinuousEngine:
        """This layout over the in-process model, `spec.slots` decode slots (`HFEngine.build`, with slots)."""
        return cls(model, tokenizer, slots=spec.slots, **spec.sampling())

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
        """The running batch, one entry per batch row (a layout may keep dead rows until it re-lays out)."""
        self.logits_RV: torch.Tensor | None = None
        """Next-token logits per batch row."""
        self.prompt_kv: OrderedDict[str, _PromptKV] = OrderedDict()
        self.refs: dict[str, int] = defaultdict(int)
        """Rows queued or running per prompt text."""
        self.next_ticket = 0
        self.prefilled_prompts = 0
        """Prompts prefilled so far (a prompt prefilled twice counts twice): the prompt cache's misses."""
        self.wasted_tokens = 0
        """Tokens decoded for rows later cancelled."""
        self._wasted_reported = 0
        self._ids_of: dict[str, list[int]] = {}
        self.weights_version = 0
        """Bumped by `sync_weights`: the prompt cache holds KV for this version only."""
        self._counters = self._counter_sum()

    @classmethod
    def from_engine(cls, engine: HFEngine, **kwargs: Any) -> ContinuousEngine:
        """A streaming engine with `engine`'s model, tokenizer and sampling settings (a fresh generator)."""
        base = {k: v for k, v in HFEngine.settings(engine).items() if k not in ("batch_size", "drop_finished")}
        return cls(engine.model, engine.tokenizer, **{**base, **kwargs})

    def settings(self) -> dict[str, Any]:
        layout = dict(slots=self.slots, steps_per_poll=self.steps_per_poll, max_cached_prompts=self.max_cached_prompts)
        return {**super().settings(), **layout}

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
                cap = self.max_new_tokens if r.max_tokens is None else min(r.max_tokens, self.max_new_tokens)
                self.queue.append(_Row(self.next_ticket, r.prompt.id, r.prompt.text, ids_of[r.prompt.text], cap))
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
        return generate_over_stream(self, requests)

    def clear_prompt_cache(self) -> None:
        self.prompt_kv.clear()

    def step_metrics(self) -> dict[str, Any]:
        """This step's `cancelled_tokens` (then reset): tokens decoded for rows cancelled in flight."""
        out = {"cancelled_tokens": self.wasted_tokens - self._wasted_reported}
        self._wasted_reported = self.wasted_tokens
        return out

    # -- the batch layout (subclasses) ---------------------------------------------------------------------------
    def _maybe_admit(self) -> None:
        """Move queued rows into the running batch, if the layout wants them now."""
        raise NotImplementedError

    def _step(self) -> list[Sample]:
        """One decode step over the running rows; return the samples that finished."""
        raise NotImplementedError

    def _clear_batch(self) -> None:
        """Forget the running rows (all dead)."""
        raise NotImplementedError

    # -- shared by every layout ----------------------------------------------------------------------------------
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
            elif len(row.tokens) >= row.max_tokens:
                finished.append((row, "length"))
        if check_stop:
            tails = self.tokenizer.batch_decode(
                [r.tokens[-self._stop_window :] for r in check_stop], skip_special_tokens=True
            )
            for row, tail in zip(check_stop, tails, strict=True):
                if any(s in tail for s in self.stop):
                    finished.append((row, "stop"))
                elif len(row.tokens) >= row.max_tokens:
                    finished.append((row, "length"))
        out = []
        for row, why in finished:
            row.dead = True
            self._release(row.text)
            text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
            text = self._cut_at_stop(text) if why == "stop" else text
            out.append(
                Sample(
                    row.prompt_id,
                    text,
                    row.tokens,
                    row.logprobs,
                    len(row.tokens),
                    why,
                    index=row.ticket,
                    prompt_tokens=len(row.ids),
                )
            )
        return out

    def _prefill_prompts(self, texts: list[str], rows: list[_Row]) -> Any:
        """One left-padded forward over the prompts not cached; store each one's unpadded KV and last logits.
        Returns the forward's HF cache object (None when every prompt was cached)."""
        if not texts:
            return None
        ids_of = {r.text: r.ids for r in rows}
        ids_UP, mask_UP = left_pad([ids_of[t] for t in texts], self.pad_id, device=self.device)
        logits_U1V, cache = model_forward(
            self.model, ids_UP, mask_UP, position_ids_from_mask(mask_UP), use_cache=True, logits_to_keep=1
        )
        kv, P = _get_kv(cache), ids_UP.shape[1]
        for u, text in enumerate(texts):
            n = len(ids_of[text])
            self.prompt_kv[text] = _PromptKV(
                torch.stack([torch.stack([k[u, :, P - n :], v[u, :, P - n :]]) for k, v in kv]), logits_U1V[u, -1]
            )
        self.prefilled_prompts += len(texts)
        return cache

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

    # -- the weights the prompt cache belongs to ------------------------------------------------------------------
    def sync_weights(self, model: torch.nn.Module) -> None:
        """The weights of `model` (this engine's own model) changed: drop the prompt cache computed with the old ones.

        Call it after every in-place change of the weights -- an optimizer step (fused or not), `.data` writes, a
        checkpoint load. Raises if rows are still decoding (their KV caches came from the old weights)."""
        if model is not self.model:
            raise ConfigError("sync_weights(model): this engine samples from its own model object; pass that one")
        self._invalidate()
        self.weights_version += 1

    def _counter_sum(self) -> int:
        return sum(p._version for p in self.model.parameters())

    def _check_weights(self) -> None:
        """The safety net: parameters' version counters moved (an in-place write nobody announced)."""
        if self._counter_sum() != self._counters:
            self._invalidate()

    def _invalidate(self) -> None:
        if any(not r.dead for r in self.rows):
            raise RuntimeError("the model's weights changed while samples were decoding; drain or cancel them first")
        self._counters = self._counter_sum()
        self.clear_prompt_cache()
