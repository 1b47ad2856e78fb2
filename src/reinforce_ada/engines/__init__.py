"""Rollout engines: samples from a policy, behind the drivers' two interfaces (`sampling.rounds.Engine`'s
`generate(requests)`, `sampling.streaming.StreamingEngine`'s submit/poll/cancel) and the trainer's contract
(`protocol.RolloutEngine`, with its declared `Capabilities`).

Owns: the engine registry and factory (`factory`: `ENGINES`, `build_engine`, `local_engine`), the contract
(`protocol`), `HFEngine` (batched decode loop), `ContinuousEngine` with its two layouts `HFStreamEngine` and
`SlotEngine` (continuous batching), `VLLMEngine`, the `[generation]` config, and the `[rollout]` config with
`RayRolloutPool` (`ray_pool`, `ray_worker`, `ray_state`, `ray_cluster`: Ray rollout workers, `ray` imported
lazily).
May import: `types`, `errors`, `sampling` (the protocols, option names and `over_stream`), `models` (forward
helpers). Heavy backends are imported lazily from a string table, so `import reinforce_ada` never imports them.
"""

from __future__ import annotations

from reinforce_ada.engines.factory import DECODES, ENGINES, build_engine, engine_class, local_engine
from reinforce_ada.engines.protocol import Capabilities, EngineSpec, RolloutEngine
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
]
