"""The "hf" engine: our decode loops over the in-process model, in the layout a run asks for.

`local_engine` picks it: `SlotEngine` (engines/slots.py: static slot KV cache, fused decode step) when `decode` is
fused, or auto and the model supports it; else `HFStreamEngine` (engines/hf_stream.py) for streaming and `HFEngine`
(engines/hf.py) for rounds. The choice lives here, above the three layouts, because two of them subclass `HFEngine`
(through `ContinuousEngine`): `hf.py` cannot import them back. `LocalEngine` is what the registry names "hf"; it only
builds, and what it built declares its own capabilities (streaming and prompt_cache for the continuous layouts).
"""

from __future__ import annotations

from typing import Any, ClassVar

from reinforce_ada.engines.config import DECODES
from reinforce_ada.engines.hf import HFEngine
from reinforce_ada.engines.hf_stream import HFStreamEngine
from reinforce_ada.engines.protocol import Capabilities, EngineSpec, RolloutEngine
from reinforce_ada.engines.slots import SlotEngine, supports_fused
from reinforce_ada.errors import ConfigError


def local_engine(
    model: Any, tokenizer: Any, *, decode: str, streaming: bool, slots: int, batch_size: int, **kwargs: Any
) -> HFEngine:
    """The "hf" engine's layout for a local HF model (see the module docstring). `kwargs` are the sampling settings
    and seed."""
    if decode not in DECODES:
        raise ConfigError(f"decode={decode!r} is not valid; choose one of {list(DECODES)}")
    if decode == "fused" or (decode == "auto" and supports_fused(model)):
        return SlotEngine(model, tokenizer, slots=slots, **kwargs)
    if streaming:
        return HFStreamEngine(model, tokenizer, slots=slots, **kwargs)
    return HFEngine(model, tokenizer, batch_size=batch_size, **kwargs)


class LocalEngine:
    """Registered as "hf" (`engines.registry`): builds the layout `local_engine` picks for `spec`."""

    capabilities: ClassVar[Capabilities] = Capabilities()
    """What every layout does (samples from the in-process model); the built engine declares the rest."""

    @classmethod
    def build(cls, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> RolloutEngine:
        return local_engine(
            model,
            tokenizer,
            decode=spec.decode,
            streaming=spec.streaming,
            slots=spec.slots,
            batch_size=spec.batch_size,
            **spec.sampling(),
        )
