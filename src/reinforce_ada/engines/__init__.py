"""Rollout engines behind one narrow interface: `generate(requests) -> samples`.

Heavy backends are imported lazily from a string table, so `import reinforce_ada` never imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

from reinforce_ada.types import Request, Sample


class Engine(Protocol):
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """Return `k` samples per request, grouped in request order. `reward` is None unless the engine scores."""
        ...


ENGINES = {
    "sim": "reinforce_ada.sim:SimulatedPolicy",
    "hf": "reinforce_ada.engines.hf:HFEngine",
    "hf_stream": "reinforce_ada.engines.hf_stream:HFStreamEngine",
    "vllm": "reinforce_ada.engines.vllm:VLLMEngine",
}


def engine_class(name: str) -> type:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, attr = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), attr)
