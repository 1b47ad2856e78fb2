"""Rollout engines behind one narrow interface: `generate(requests) -> samples`.

Heavy backends are imported lazily from a string table, so `import reinforce_ada` never imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

from reinforce_ada.types import Request, Sample


class Engine(Protocol):
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """Return `k` samples per request, grouped in request order. `reward` is None unless the engine scores."""
        ...


ENGINES = {
    "sim": "reinforce_ada.sim:SimulatedPolicy",
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


DECODES = ("auto", "fused", "hf")
"""`local_engine`'s decode choices (`generation.decode`)."""


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
