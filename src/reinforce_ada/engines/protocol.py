"""The trainer's side of a rollout engine: `RolloutEngine` (a Protocol), its declared `Capabilities`, and the one
build input every engine takes (`EngineSpec`).

1) Every engine has `generate` (the round driver's `Engine`), `pad_id`, `state_dict` / `load_state_dict` (its
   random state, checkpointed), `sync_weights(model)` (called after every change of the learner's weights: copies
   them into an engine that holds its own, or drops state computed from the old ones), `reseed(seed)` and
   `with_sampling(**overrides)` (a sibling with other sampling settings over the same weights, e.g. the greedy
   engine of evaluation).
2) What only some engines do is declared on the class as `capabilities`, never probed with `hasattr`:
   `streaming` (submit / poll / cancel / idle: the streaming driver's `StreamingEngine`), `own_weights` (loads its own
   copy of the policy from the folder; the in-process model is not needed), `step_metrics` (per-step rollout metrics)
   and `prompt_cache` (keeps prompts' KV across calls; `clear_prompt_cache` drops it).
3) An engine is built by `engines.factory.build_engine(name, spec, model=, tokenizer=, model_path=)`, which calls the
   registered class's `build` classmethod with that one signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol, runtime_checkable

from reinforce_ada.types import Request, Sample


@dataclass(frozen=True)
class Capabilities:
    """What an engine does beyond the required contract; the trainer reads these flags."""

    streaming: bool = False
    """submit / poll / cancel / idle (`sampling.streaming.StreamingEngine`)."""
    own_weights: bool = False
    """Samples from its own copy of the weights, loaded from `model_path`: `sync_weights` copies the learner's."""
    step_metrics: bool = False
    """`step_metrics()` returns this step's rollout metrics (then resets)."""
    prompt_cache: bool = False
    """Keeps prompts' KV caches across calls; `clear_prompt_cache()` drops them."""


@dataclass(frozen=True)
class EngineSpec:
    """The settings every engine is built from (picklable: Ray workers receive it). Each engine reads what it uses."""

    max_new_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int = 0
    streaming: bool = False
    """Will be driven through submit / poll: a local engine picks a continuous-batching layout."""
    decode: str = "auto"
    """Local engines' decode step (`generation.decode`)."""
    slots: int = 256
    batch_size: int = 256
    dtype: str = "auto"
    """Weights' dtype for engines that load their own copy (vLLM); the trainer passes the learner's (float32 or
    bfloat16): vLLM's "auto" downcasts fp32 checkpoints on CPU."""

    def sampling(self) -> dict[str, Any]:
        """The sampling settings and seed, as keyword arguments."""
        names = ("max_new_tokens", "temperature", "top_p", "top_k", "stop", "seed")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in names}


@runtime_checkable
class RolloutEngine(Protocol):
    """The contract the trainer, evaluation and Ray workers rely on; see the module docstring."""

    capabilities: ClassVar[Capabilities]
    pad_id: int

    def generate(self, requests: Sequence[Request]) -> list[Sample]: ...

    def sync_weights(self, model: Any) -> None: ...

    def reseed(self, seed: int) -> None:
        """Restart the engine's randomness from `seed` (Ray workers: a chunk's samples must not depend on history)."""
        ...

    def with_sampling(self, **overrides: Any) -> RolloutEngine:
        """A sibling engine over the same weights with some sampling settings replaced (e.g. temperature=0)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


OPTIONAL_METHODS = {
    "streaming": ("submit", "poll", "cancel", "idle"),
    "step_metrics": ("step_metrics",),
    "prompt_cache": ("clear_prompt_cache",),
}
"""The methods each capability promises (the contract test checks them on every registered engine)."""
