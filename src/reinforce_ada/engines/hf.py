"""Rollout engine for any local HF causal LM, with its own batched decode loop (not `model.generate`).

1) Requests expand to rows, k per prompt in request order, run in micro-batches of `batch_size` rows. A micro-batch
   prefills each *distinct* prompt once (left-padded, position_ids = cumsum(mask) - 1, no special tokens added:
   `Prompt.text` carries them), copies its KV cache to the rows that share it, then decodes token by token.
2) Sampling: logits / temperature, then top-k, then top-p, then one draw from a seeded `torch.Generator`;
   temperature 0 is greedy (argmax, as `model.generate(do_sample=False)`). Results are deterministic for a given
   seed, model, batch_size and sequence of calls (the generator advances across calls; see `state_dict`).
3) `Sample.logprobs[t]` = log_softmax(logits / T)[token] under the *untruncated* tempered distribution (T = 1 when
   greedy), in float32: exactly what `policy.sequence_logprobs(..., temperature=T)` recomputes, so the PPO ratio is
   1 on-policy. With top-k/top-p on, tokens are drawn from the truncated distribution but, as vLLM does by default,
   the untruncated log-prob is reported: it is the one the trainer can recompute.
4) A row finishes on an EOS id (the tokenizer's plus `generation_config`'s), when its decoded completion contains a
   stop string, or after `max_new_tokens`: `finish_reason` is "eos", "stop" or "length" (EOS wins when one token is
   both). Finished is a flag, never inferred from the pad id, so pad == eos is safe. A finished row is fed pad with
   attention mask 0 until finished rows make up an eighth of the batch; then they are dropped, KV cache included.
5) `token_ids` keep the EOS token (its log-prob is trained: it is how the policy learns to stop) and every token up
   to the one that completed a stop string. `text` is their decode with special tokens skipped, cut just before the
   first stop string (vLLM's default), so for "stop" `text` is a prefix of decode(token_ids).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from reinforce_ada.engines.protocol import Capabilities, EngineSpec
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import left_pad, model_forward, position_ids_from_mask
from reinforce_ada.types import Request, Sample

FINISH_REASONS = ("", "eos", "stop", "length")
"""Finish codes used inside the loop; 0 = still running."""
DROP_FRACTION = 8
"""Drop finished rows once they are >= 1/DROP_FRACTION of the batch: each drop copies the whole KV cache."""


@dataclass
class Throughput:
    """Completion tokens and wall time summed over `generate` calls (assign a new one to reset)."""

    tokens: int = 0
    sequences: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def filter_logits(logits_BV: torch.Tensor, *, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Set logits outside the top-k and then outside the top-p nucleus to -inf (0 and 1.0 disable each).

    The nucleus is the smallest set of most likely tokens whose mass reaches `top_p`; the top token always stays.
    """
    if 0 < top_k < logits_BV.shape[-1]:
        kth_B1 = torch.topk(logits_BV, top_k, dim=-1).values[:, -1:]
        logits_BV = logits_BV.masked_fill(logits_BV < kth_B1, float("-inf"))
    if top_p < 1.0:
        sorted_BV, order_BV = logits_BV.sort(dim=-1, descending=True)
        probs_BV = sorted_BV.softmax(dim=-1)
        # drop a token once the mass strictly before it already reaches top_p
        drop_sorted_BV = probs_BV.cumsum(dim=-1) - probs_BV >= top_p
        drop_BV = torch.zeros_like(drop_sorted_BV).scatter(-1, order_BV, drop_sorted_BV)
        logits_BV = logits_BV.masked_fill(drop_BV, float("-inf"))
    return logits_BV


def sample_next(
    logits_BV: torch.Tensor,
    *,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; return `(tokens_B, logp_B)` with logp under log_softmax(logits / T), untruncated."""
    logits_BV = logits_BV.float()
    if temperature == 0:
        tokens_B = logits_BV.argmax(dim=-1)
        logp_BV = logits_BV.log_softmax(dim=-1)
    else:
        scaled_BV = logits_BV / temperature
        logp_BV = scaled_BV.log_softmax(dim=-1)
        probs_BV = filter_logits(scaled_BV, top_k=top_k, top_p=top_p).softmax(dim=-1)
        tokens_B = torch.multinomial(probs_BV, 1, generator=generator).squeeze(-1)
    return tokens_B, logp_BV.gather(-1, tokens_B.unsqueeze(-1)).squeeze(-1)


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: set[int] = set()
    for source in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if source is None:
            continue
        ids.update([source] if isinstance(source, int) else source)
    return sorted(ids)


SAMPLING_DEFAULTS: dict[str, Any] = {"max_new_tokens": 16, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "stop": ()}
"""The sampling settings every engine takes, and their defaults (`HFEngine`'s keyword arguments)."""


def pop_sampling(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the sampling settings out of `kwargs` (defaults for those missing) and check them."""
    settings = {name: kwargs.pop(name, default) for name, default in SAMPLING_DEFAULTS.items()}
    check_sampling(**settings)
    return settings


def check_sampling(*, max_new_tokens: int, temperature: float, top_p: float, top_k: int, stop: Sequence[str]) -> None:
    """Sampling settings shared by every engine; the message names the bad one and its valid range."""
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if not (temperature >= 0 and temperature != float("inf")):  # NaN fails >= 0
        raise ConfigError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ConfigError(f"top_p must be in (0, 1], got {top_p}")
    if top_k < 0:
        raise ConfigError(f"top_k must be >= 0 (0 = off), got {top_k}")
    if isinstance(stop, str) or any(not s for s in stop):
        raise ConfigError(f"stop must be a sequence of non-empty strings, got {stop!r}")


class HFEngine:
    """Sample completions from a local HF causal LM; see the module docstring for padding, EOS and log-probs.

    `build` makes this class (round mode) over the in-process model, so a subclass is an engine with one registry
    line. The registered "hf" engine is `engines.local.LocalEngine`, which picks this class or a continuous-batching
    layout (streaming, or the fused decode)."""

    capabilities: ClassVar[Capabilities] = Capabilities()

    @classmethod
    def build(cls, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> HFEngine:
        return cls(model, tokenizer, batch_size=spec.batch_size, **spec.sampling())

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop: Sequence[str] = (),
        batch_size: int = 256,
        seed: int = 0,
        drop_finished: bool = True,
        eos_token_ids: Sequence[int] | None = None,
    ) -> None:
        check_sampling(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, stop=stop)
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.temperature, self.top_p, self.top_k = max_new_tokens, temperature, top_p, top_k
        self.stop, self.batch_size, self.seed, self.drop_finished = tuple(stop), batch_size, seed, drop_finished
        self.eos_token_ids = list(eos_token_ids) if eos_token_ids is not None else _eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.eos_token_ids[0] if self.eos_token_ids else 0)
        # a stop string of n chars spans at most n tokens, give or take tokens that decode to nothing
        self._stop_window = max((len(s) for s in self.stop), default=0) + 8
        # build the engine after placing the model: the generator lives on the model's device
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.throughput = Throughput()
        self._modules = list(model.modules())

    def settings(self) -> dict[str, Any]:
        """The constructor's keyword arguments that rebuild this engine over the same model."""
        return dict(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            stop=self.stop,
            seed=self.seed,
            eos_token_ids=self.eos_token_ids,
            batch_size=self.batch_size,
            drop_finished=self.drop_finished,
        )

    def with_sampling(self, **overrides: Any) -> HFEngine:
        """A new engine of this class over the same model, with `overrides` (e.g. temperature=0, seed=0) applied."""
        return type(self)(self.model, self.tokenizer, **{**self.settings(), **overrides})

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])

    def sync_weights(self, model: torch.nn.Module) -> None:
        """The weights of `model` changed in place. Nothing to do here: every `generate` prefills afresh (the
        continuous engines drop their prompt cache)."""
        if model is not self.model:
            raise ConfigError("sync_weights(model): this engine samples from its own model object; pass that one")

    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """k samples per request, in request order, `index` 0..k-1 within each request, `reward` None."""
        start = time.perf_counter()
        texts = list(dict.fromkeys(r.prompt.text for r in requests))
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        ids_of = dict(zip(texts, encoded, strict=True))
        for r in requests:
            if not ids_of[r.prompt.text]:
                raise ConfigError(f"prompt {r.prompt.id!r} tokenises to zero tokens")
        rows = [(r, j) for r in requests for j in range(r.k)]
        samples: list[Sample] = []
        with self._inference():
            for lo in range(0, len(rows), self.batch_size):
                chunk = rows[lo : lo + self.batch_size]
                caps = [self.max_new_tokens if r.max_tokens is None else r.max_tokens for r, _ in chunk]
                ids, logps, reasons = self._decode([ids_of[r.prompt.text] for r, _ in chunk], caps)
                texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
                for (r, j), i, lp, why, text in zip(chunk, ids, logps, reasons, texts, strict=True):
                    text = self._cut_at_stop(text) if why == "stop" else text
                    n_prompt = len(ids_of[r.prompt.text])
                    samples.append(Sample(r.prompt.id, text, i, lp, len(i), why, index=j, prompt_tokens=n_prompt))
        self.throughput.tokens += sum(s.num_tokens for s in samples)
        self.throughput.sequences += len(samples)
        self.throughput.seconds += time.perf_counter() - start
        return samples

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """Eval mode and inference mode for the duration, then the caller's train/eval mode back.

        Flips each module's `training` flag directly (what `Module.train` does, minus its recursion): a streaming
        engine enters this once per `poll`, many times a step. The module list is taken at construction.
        """
        was_training = self.model.training
        if was_training:
            for m in self._modules:
                m.training = False
        try:
            with torch.inference_mode():
                yield
        finally:
            if was_training:
                for m in self._modules:
                    m.training = True

    def _cut_at_stop(self, text: str) -> str:
        cuts = [text.find(s) for s in self.stop if s in text]
        return text[: min(cuts)] if cuts else text

    def _prefill(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """One forward over the distinct prompts; return `(next-token logits_BV, mask_BP, kv cache)` for every row."""
        uniq: dict[tuple[int, ...], int] = {}
        row_to_uniq = [uniq.setdefault(tuple(p), len(uniq)) for p in prompts]
        ids_UP, mask_UP = left_pad(list(uniq), self.pad_id, device=self.device)
        logits_U1V, kv = model_forward(
            self.model, ids_UP, mask_UP, position_ids_from_mask(mask_UP), use_cache=True, logits_to_keep=1
        )
        sel_B = torch.tensor(row_to_uniq, device=self.device)
        if row_to_uniq != list(range(len(prompts))):
            kv.batch_select_indices(sel_B)  # fan each distinct prompt's cache out to its k rows
        return logits_U1V[sel_B, -1], mask_UP[sel_B], kv

    def _decode(
        self, prompts: list[list[int]], caps: list[int] | None = None
    ) -> tuple[list[list[int]], list[list[float]], list[str]]:
        """Decode one micro-batch; return per-row lists `(token_ids, logprobs, finish_reasons)`. `caps`: each row's
        own cap (a request's `max_tokens`), at most `max_new_tokens`."""
        dev, B = self.device, len(prompts)
        cap_B = torch.tensor(
            [min(c, self.max_new_tokens) for c in caps] if caps else [self.max_new_tokens] * B, device=dev
        )
        N = int(cap_B.max()) if B else self.max_new_tokens
        logits_RV, mask_RL, kv = self._prefill(prompts)
        next_pos_R = mask_RL.sum(dim=-1)
        # R indexes the rows still in the batch; live_R maps them back to the micro-batch row b
        live_R = torch.arange(B, device=dev)
        tokens_BN = torch.full((B, N), self.pad_id, dtype=torch.long, device=dev)
        logp_BN = torch.zeros((B, N), dtype=torch.float32, device=dev)
        finish_B = torch.zeros(B, dtype=torch.long, device=dev)
        length_B = torch.zeros(B, dtype=torch.long, device=dev)
        eos_E = torch.tensor(self.eos_token_ids, dtype=torch.long, device=dev)
        for step in range(N):
            tok_R, lp_R = sample_next(
                logits_RV, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, generator=self.generator
            )
            running_R = finish_B[live_R] == 0
            rows = live_R[running_R]
            tokens_BN[rows, step], logp_BN[rows, step] = tok_R[running_R], lp_R[running_R]
            eos_R = torch.isin(tok_R, eos_E) & running_R
            stop_R = self._stop_hits(tokens_BN, live_R, running_R & ~eos_R, step)
            capped_R = cap_B[live_R] <= step + 1  # the row's own cap reached
            code_R = torch.where(eos_R, 1, torch.where(stop_R, 2, torch.where(capped_R, 3, 0)))
            ended_R = running_R & (code_R > 0)
            finish_B[live_R[ended_R]] = code_R[ended_R]
            length_B[live_R[ended_R]] = step + 1
            running_R = running_R & ~ended_R
            if not bool(running_R.any()):
                break
            if self.drop_finished and int((~running_R).sum()) * DROP_FRACTION >= len(live_R):
                keep_R = running_R.nonzero().squeeze(-1)
                kv.batch_select_indices(keep_R)
                live_R, mask_RL, tok_R = live_R[keep_R], mask_RL[keep_R], tok_R[keep_R]
                next_pos_R, running_R = next_pos_R[keep_R], running_R[keep_R]
            tok_R = tok_R.masked_fill(~running_R, self.pad_id)
            mask_RL = torch.cat([mask_RL, running_R.long().unsqueeze(-1)], dim=-1)
            logits_R1V, kv = model_forward(
                self.model,
                tok_R.unsqueeze(-1),
                mask_RL,
                next_pos_R.unsqueeze(-1),
                kv_cache=kv,
                use_cache=True,
                logits_to_keep=1,
            )
            logits_RV, next_pos_R = logits_R1V[:, -1], next_pos_R + 1
        lengths, codes = length_B.tolist(), finish_B.tolist()
        tokens, logps = tokens_BN.tolist(), logp_BN.tolist()
        return (
            [row[:n] for row, n in zip(tokens, lengths, strict=True)],
            [row[:n] for row, n in zip(logps, lengths, strict=True)],
            [FINISH_REASONS[c] for c in codes],
        )

    def _stop_hits(self, tokens_BN: torch.Tensor, live_R: torch.Tensor, check_R: torch.Tensor, step: int):
        """Bool (R,): does the decoded tail of each checked row's completion contain a stop string?"""
        hits_R = torch.zeros_like(check_R)
        if not self.stop:
            return hits_R
        idx = check_R.nonzero().squeeze(-1)
        if len(idx) == 0:
            return hits_R
        tails = tokens_BN[live_R[idx], max(0, step + 1 - self._stop_window) : step + 1].tolist()
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=True)
        hit = [any(s in t for s in self.stop) for t in texts]
        hits_R[idx] = torch.tensor(hit, dtype=torch.bool, device=hits_R.device)
        return hits_R
