"""vLLM rollout engine for GPU users (optional extra: `pip install vllm`; CUDA only from PyPI).

1) Requests go to vLLM's offline `LLM.generate` as token-id prompts, one `SamplingParams(n=k)` per request, so vLLM's
   prefix caching shares each prompt across its k samples; `logprobs=0` returns the sampled token's log-prob, which
   becomes `Sample.logprobs` (vLLM reports log-probs of the untruncated distribution after temperature, the same
   definition as `HFEngine`).
2) `sync_weights(model)` copies the trainer's current weights into vLLM after each update (colocated, same process:
   run vLLM with `VLLM_ENABLE_V1_MULTIPROCESSING=0` so the model runner lives in this process). LoRA policies are
   merged before the copy.
Not yet verified on a GPU in this project (no device was available when it was written): `to_samples` is tested
on CPU with fake vLLM outputs; the weight-sync path depends on vLLM internals that move between releases, and fails
with a message naming the attribute it could not find.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Request, Sample


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
        for j, c in enumerate(out.outputs):
            ids = list(c.token_ids)
            # logprobs: one {token id: Logprob} dict per generated token; take the sampled token's entry
            lps = [float(_lp(d, t)) for d, t in zip(c.logprobs or [], ids, strict=False)]
            reason = {"stop": "stop", "length": "length"}.get(c.finish_reason or "", c.finish_reason or "")
            if reason == "stop" and ids and ids[-1] in eos_ids:
                reason = "eos"
            samples.append(Sample(req.prompt.id, c.text, ids, lps, len(ids), reason, index=j))
    return samples


def _lp(entry: dict, token: int) -> float:
    v = entry[token] if token in entry else next(iter(entry.values()))
    return v.logprob if hasattr(v, "logprob") else v


class VLLMEngine:
    """`generate(requests) -> samples` through vLLM's offline API; see the module docstring."""

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop: Sequence[str] = (),
        seed: int = 0,
        gpu_memory_utilization: float = 0.4,
        **llm_kwargs: Any,
    ):
        from reinforce_ada.engines.hf import check_sampling

        check_sampling(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, stop=stop)
        try:
            import vllm
        except ImportError:
            raise ConfigError("the vllm engine needs vLLM (CUDA): pip install vllm") from None
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # keep the model runner in this process
        self.vllm, self.tokenizer = vllm, tokenizer
        self.llm = vllm.LLM(
            model=model_path,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            enable_prefix_caching=True,
            **llm_kwargs,
        )
        self.params = dict(
            max_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k if top_k > 0 else -1,
            stop=list(stop) or None,
            logprobs=0,
        )
        self.seed, self.calls = seed, 0
        self.eos_ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (self.eos_ids or [0])[0]

    def state_dict(self) -> dict[str, Any]:
        # per-request seeds derive from the call counter, so restoring it resumes the same sample stream
        return {"calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = int(state["calls"])

    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        from vllm.inputs import TokensPrompt

        prompts = [
            TokensPrompt(prompt_token_ids=self.tokenizer(r.prompt.text, add_special_tokens=False)["input_ids"])
            for r in requests
        ]
        self.calls += 1
        params = [
            self.vllm.SamplingParams(n=r.k, seed=self.seed * 1_000_003 + self.calls * 1009 + i, **self.params)
            for i, r in enumerate(requests)
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return to_samples(requests, outputs, self.eos_ids)

    def sync_weights(self, model: Any) -> None:
        """Load the policy's current weights into the vLLM model (after each optimizer step)."""
        if hasattr(model, "merge_and_unload"):  # LoRA: vLLM gets merged weights; the trainer keeps its adapter
            import copy

            model = copy.deepcopy(model).merge_and_unload()
        executor = self.llm.llm_engine.model_executor
        for path in ("driver_worker.worker.model_runner.model", "driver_worker.model_runner.model"):
            target: Any = executor
            try:
                for attr in path.split("."):
                    target = getattr(target, attr)
            except AttributeError:
                continue
            target.load_weights(model.state_dict().items())
            return
        raise RuntimeError(
            "could not find vLLM's in-process model runner (model_executor.driver_worker...model); "
            "this vLLM release needs another weight-sync path"
        )
