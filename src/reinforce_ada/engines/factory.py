"""The one place engines are built: `build_engine`, over the names in `engines.registry.ENGINES`.

The trainer (in-process sampling and evaluation), `evaluation.loading` and the Ray rollout workers all build through
`build_engine(name, spec, model=, tokenizer=, model_path=)`, which calls the registered class's `build` classmethod
with that one signature (`engines.protocol`). A new engine is one file with such a class and one registry line
(`engines.registry`; from outside the package, `register_engine("mine", MyEngine)`); `generation.engine` and
`rollout.engine` accept every registered name, and the contract test runs over all of them. How the "hf" engine lays
out its decode (rounds, streaming, fused slots) is its own module's choice (`engines.local`), not this one's.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.engines.protocol import EngineSpec, RolloutEngine
from reinforce_ada.engines.registry import ENGINES, engine_class, register_engine
from reinforce_ada.errors import ConfigError

__all__ = ["ENGINES", "build_engine", "engine_class", "register_engine"]


def build_engine(name: str, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> RolloutEngine:
    """The engine `name` built from `spec`: over the in-process `model`, or, for an engine with
    `capabilities.own_weights`, over its own copy loaded from `model_path` (`model` may then be None)."""
    cls = engine_class(name)
    if cls.capabilities.own_weights and not model_path:
        raise ConfigError(f"engine {name!r} loads its own copy of the policy: give model_path (the model folder)")
    if not cls.capabilities.own_weights and model is None:
        raise ConfigError(f"engine {name!r} samples from the in-process model: give model")
    engine = cls.build(spec, model=model, tokenizer=tokenizer, model_path=model_path)
    if spec.streaming and not engine.capabilities.streaming:
        raise ConfigError(
            f"engine {name!r} does not stream (no submit/poll); set generation.streaming=false to sample in rounds"
        )
    return engine
