"""One rollout worker: a Ray actor's body, holding an engine and its own copy of the policy weights.

1) Built from the policy's folder (`model_path`, which every node must be able to read) and `[model]`, as the
   trainer builds its own copy; the engine is `engines.factory.build_engine`'s, from the run's `EngineSpec`. The
   learner's current weights are then loaded with `load_weights` before anything is sampled, so the folder only
   fixes the architecture (and, with LoRA, the frozen base weights).
2) `load_weights(params, version)` copies the published tensors (every trainable parameter: the whole model, or only
   the LoRA adapter when LoRA is on) into the worker's model, tells the engine (`sync_weights`) and records
   `version` (learner updates applied).
3) `generate(requests, seed, version)` reseeds the engine (`reseed`) with `seed` before sampling: the pool derives
   the seed from the chunk of requests, never from the worker, and drops the engine's prompt cache (prompts are
   prefilled within the chunk), so a chunk gives the same samples, bit for bit, on any worker, and again after a
   fault re-queues it. A call whose `version` is not the loaded one fails (stale weights must never
   sample).
This class is plain Python (the pool wraps it with `ray.remote`), so it runs and tests without Ray too.
Owns: `RolloutWorker`. May import: `types`, `errors`, `models`, `engines`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reinforce_ada.engines.protocol import EngineSpec
from reinforce_ada.types import Request, Sample


class StaleWeights(RuntimeError):
    """A chunk was sent for weights this worker has not loaded."""


class RolloutWorker:
    """An engine over a private copy of the policy; see the module docstring."""

    def __init__(self, model_path: str, model_cfg: Any, engine: str, spec: EngineSpec, threads: int):
        import torch

        from reinforce_ada.engines.factory import build_engine
        from reinforce_ada.models.load import load_policy

        torch.set_num_threads(threads)
        self.model, self.tokenizer = load_policy(Path(model_path), model_cfg)
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)  # the worker never trains: inference mode and no autograd bookkeeping
        self.version = -1
        spec = dataclasses.replace(spec, streaming=False)  # a worker answers whole chunks (`generate`)
        self.engine = build_engine(engine, spec, model=self.model, tokenizer=self.tokenizer, model_path=model_path)

    def pid(self) -> int:
        return os.getpid()

    def load_weights(self, params: dict[str, Any], version: int) -> int:
        """Copy `params` (name -> tensor, the learner's trainable parameters) into the model; return the pid."""
        import torch

        own = dict(self.model.named_parameters())
        unknown = [k for k in params if k not in own]
        if unknown:
            raise KeyError(f"published weights this worker's model does not have: {unknown[:3]}")
        with torch.no_grad():
            for name, value in params.items():
                own[name].copy_(value.to(own[name].device))
        self.engine.sync_weights(self.model)
        self.version = version
        return os.getpid()

    def generate(self, requests: Sequence[Request], seed: int, version: int) -> tuple[list[Sample], float]:
        """`Engine.generate` with the generator reseeded to `seed`; returns the samples and the busy seconds."""
        if version != self.version:
            raise StaleWeights(f"chunk sampled for weights version {version}, but this worker holds {self.version}")
        t0 = time.perf_counter()
        self.engine.reseed(seed)
        if self.engine.capabilities.prompt_cache:
            # a prompt cached by an earlier chunk was prefilled in another batch: float noise would make the
            # chunk's numbers depend on the worker's history, and re-sent chunks must repeat exactly
            self.engine.clear_prompt_cache()
        samples = self.engine.generate(requests)
        for s in samples:
            s.policy_version = version
        return samples, time.perf_counter() - t0
