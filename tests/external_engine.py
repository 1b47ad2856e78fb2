"""An engine written outside the package: one class, registered with one line (`ENGINES["mine"] = ...`).

It is `HFEngine`'s round-mode decode loop under another name and its own `build`, to show that a new engine needs
nothing else: the trainer, evaluation and the contract test take it by name.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.engines.hf import HFEngine
from reinforce_ada.engines.protocol import EngineSpec


class MyEngine(HFEngine):
    @classmethod
    def build(cls, spec: EngineSpec, *, model: Any, tokenizer: Any, model_path: str = "") -> MyEngine:
        return cls(model, tokenizer, batch_size=spec.batch_size, **spec.sampling())
