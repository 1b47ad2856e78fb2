"""Rollout engines: samples from a policy, behind the drivers' two interfaces (`sampling.rounds.Engine`'s
`generate(requests)`, `sampling.streaming.StreamingEngine`'s submit/poll/cancel) and the trainer's contract
(`protocol.RolloutEngine`, with its declared `Capabilities`).

Owns: the engine registry (`registry`: `ENGINES`, `register_engine`, `engine_class`: the only list of names), the
factory (`factory.build_engine`), the contract (`protocol`), the "hf" engine (`local`: `local_engine` picks its
layout) with its layouts `HFEngine` (batched decode loop) and `ContinuousEngine`'s two, `HFStreamEngine` and
`SlotEngine` (continuous batching), `VLLMEngine`, the `[generation]` config, and the `[rollout]` config with
`RayRolloutPool` (`ray_pool`, `ray_worker`, `ray_state`, `ray_cluster`: Ray rollout workers, `ray` imported
lazily). Inside, each imports only those before it: `protocol` < `registry` < `config`, `factory`; `hf` < `continuous` <
`hf_stream`, `slots` < `local`.
May import: `types`, `errors`, `sampling` (the protocols, option names and `over_stream`), `models` (forward
helpers). Heavy backends are imported lazily from a string table, so `import reinforce_ada` never imports them, and
`import reinforce_ada.engines` imports no torch (`local_engine` is imported on first use).
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.engines.config import DECODES
from reinforce_ada.engines.factory import build_engine
from reinforce_ada.engines.protocol import Capabilities, EngineSpec, RolloutEngine
from reinforce_ada.engines.registry import ENGINES, engine_class, register_engine
from reinforce_ada.sampling.rounds import Engine
from reinforce_ada.sampling.streaming import StreamingEngine

__all__ = [
    "DECODES",
    "ENGINES",
    "Capabilities",
    "Engine",
    "EngineSpec",
    "RolloutEngine",
    "StreamingEngine",
    "build_engine",
    "engine_class",
    "local_engine",
    "register_engine",
]


def __getattr__(name: str) -> Any:
    if name == "local_engine":  # engines.local imports torch: only when asked for
        from reinforce_ada.engines.local import local_engine

        return local_engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
