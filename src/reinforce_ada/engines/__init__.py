"""Rollout engines: samples from a policy, behind the drivers' two interfaces (`sampling.rounds.Engine`'s
`generate(requests)`, `sampling.streaming.StreamingEngine`'s submit/poll/cancel).

Owns: `HFEngine` (batched decode loop), `ContinuousEngine` with its two layouts `HFStreamEngine` and `SlotEngine`
(continuous batching), `VLLMEngine`, the `[generation]` config and `local_engine` (the trainer's choice), and the
`[rollout]` config with `RayRolloutPool` (`ray_pool`, `ray_worker`: Ray rollout workers, `ray` imported lazily).
May import: `types`, `errors`, `sampling` (the protocols and option names), `models` (forward helpers). Heavy
backends are imported lazily from a string table, so `import reinforce_ada` never imports them.
"""

from __future__ import annotations

import importlib
from typing import Any

from reinforce_ada.engines.config import DECODES
from reinforce_ada.sampling.rounds import Engine
from reinforce_ada.sampling.streaming import StreamingEngine

ENGINES = {
    "sim": "reinforce_ada.simulation.policy:SimulatedPolicy",
    "hf": "reinforce_ada.engines.hf:HFEngine",
    "hf_stream": "reinforce_ada.engines.hf_stream:HFStreamEngine",
    "slots": "reinforce_ada.engines.slots:SlotEngine",
    "vllm": "reinforce_ada.engines.vllm:VLLMEngine",
}


def engine_class(name: str) -> type:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, attr = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def local_engine(
    model: Any, tokenizer: Any, *, decode: str, streaming: bool, slots: int, batch_size: int, **kwargs: Any
) -> Any:
    """The engine for a local HF model: `SlotEngine` when `decode` is fused (or auto and the model supports it),
    else `HFStreamEngine` for streaming and `HFEngine` for rounds. `kwargs` are the sampling settings and seed."""
    from reinforce_ada.engines.hf import HFEngine
    from reinforce_ada.engines.hf_stream import HFStreamEngine
    from reinforce_ada.engines.slots import SlotEngine, supports_fused

    if decode not in DECODES:
        raise ValueError(f"decode={decode!r} is not valid; choose one of {list(DECODES)}")
    if decode == "fused" or (decode == "auto" and supports_fused(model)):
        return SlotEngine(model, tokenizer, slots=slots, **kwargs)
    if streaming:
        return HFStreamEngine(model, tokenizer, slots=slots, **kwargs)
    return HFEngine(model, tokenizer, batch_size=batch_size, **kwargs)


__all__ = ["DECODES", "ENGINES", "Engine", "StreamingEngine", "engine_class", "local_engine"]
