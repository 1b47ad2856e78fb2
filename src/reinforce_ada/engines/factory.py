"""The one place engines are named and built: `ENGINES` (name -> "module:Class", imported lazily) and `build_engine`.

The trainer (in-process sampling and evaluation), `evaluation.loading` and the Ray rollout workers all build through
`build_engine(name, spec, model=, tokenizer=, model_path=)`, which calls the registered class's `build` classmethod
with that one signature (`engines.protocol`). A new engine is one file with such a class and one line here (or,
from outside the package, `ENGINES["mine"] = "my_pkg.my_engine:MyEngine"`); `generation.engine` and
`rollout.engine` accept every registered name, and the contract test runs over all of them.
"""

from __future__ import annotations

import importlib
from typing import Any

from reinforce_ada.engines.config import DECODES
from reinforce_ada.engines.protocol import Capabilities, EngineSpec, RolloutEngine
from reinforce_ada.errors import ConfigError

ENGINES: dict[str, str] = {
    "hf": "reinforce_ada.engines.hf:HFEngine",
    "vllm": "reinforce_ada.engines.vllm:VLLMEngine",
}
"""Engine name -> "module:Class"; the class has `capabilities` and `build(spec, *, model, tokenizer, model_path)`."""


def engine_class(name: str) -> type:
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, attr = ENGINES[name].split(":")
    cls = getattr(importlib.import_module(module), attr)
    if not isinstance(getattr(cls, "capabilities", None), Capabilities) or not callable(getattr(cls, "build", None)):
        raise ConfigError(
            f"engine {name!r} ({ENGINES[name]}) must declare `capabilities = Capabilities(...)` and a classmethod "
            "`build(spec, *, model, tokenizer, model_path)` (engines/protocol.py)"
        )
    return cls


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


def local_engine(
    model: Any, tokenizer: Any, *, decode: str, streaming: bool, slots: int, batch_size: int, **kwargs: Any
) -> Any:
    """The "hf" engine's layout for a local HF model: `SlotEngine` when `decode` is fused (or auto and the model
    supports it), else `HFStreamEngine` for streaming and `HFEngine` for rounds. `kwargs` are the sampling settings
    and seed."""
    from reinforce_ada.engines.hf import HFEngine
    from reinforce_ada.engines.hf_stream import HFStreamEngine
    from reinforce_ada.engines.slots import SlotEngine, supports_fused

    if decode not in DECODES:
        raise ConfigError(f"decode={decode!r} is not valid; choose one of {list(DECODES)}")
    if decode == "fused" or (decode == "auto" and supports_fused(model)):
        return SlotEngine(model, tokenizer, slots=slots, **kwargs)
    if streaming:
        return HFStreamEngine(model, tokenizer, slots=slots, **kwargs)
    return HFEngine(model, tokenizer, batch_size=batch_size, **kwargs)
