"""A pass-rate oracle: the exact pass rate of each prompt under the current policy, for benchmark ceilings.

1) `PassRateOracle` wraps one batched callable `rates(prompts) -> array of pass rates in [0, 1]`. It caches each
   prompt's rate (by prompt id) for the current policy version; `invalidate()` forgets them all (new weights) and
   `prefetch(prompts)` computes every uncached prompt in one call, so a strategy reading many estimates at once
   (MoPPS's candidates, Est's batch) costs one batched call, not one per prompt.
2) The memory (`sampling.memory`, `estimator="oracle"`) reads it in place of its tracker: its posterior is a Beta
   concentrated on the oracle's rate. What the oracle costs is not charged to any budget: it is an instrument for
   ceilings (bench arms `oracle-*`), not an allocator one could deploy.
3) Where the rates come from is the caller's: the trainer builds it from teacher-forced exact pass rates
   (`training.oracle.exact_oracle`, exact-answer tasks only), the simulator from the simulated policy's true rates.
Its state is not checkpointed: it is recomputed from the weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

RatesFn = Callable[[Sequence[Prompt]], np.ndarray]


class PassRateOracle:
    def __init__(self, rates: RatesFn):
        self._rates = rates
        self.cache: dict[str, float] = {}
        """prompt id -> pass rate under the current policy version."""
        self.version = 0
        """Bumped by every `invalidate()`."""
        self.calls = 0
        """Batched calls made to `rates` (a cost counter for tests and logs)."""

    def invalidate(self) -> None:
        """The policy changed: every cached rate is stale."""
        self.cache.clear()
        self.version += 1

    def prefetch(self, prompts: Sequence[Prompt]) -> None:
        """Compute the rate of every prompt not cached yet, in one batched call."""
        missing = list({p.id: p for p in prompts if p.id not in self.cache}.values())
        if not missing:
            return
        got = np.asarray(self._rates(missing), dtype=float).reshape(-1)
        self.calls += 1
        if len(got) != len(missing):
            raise ValueError(f"pass-rate oracle returned {len(got)} rates for {len(missing)} prompts")
        for p, r in zip(missing, got.tolist(), strict=True):
            if not (math.isfinite(r) and 0.0 <= r <= 1.0):
                raise ValueError(f"pass-rate oracle returned {r} for prompt {p.id!r}; a pass rate must be in [0, 1]")
            self.cache[p.id] = r

    def rate(self, prompt: Prompt) -> float:
        self.prefetch([prompt])
        return self.cache[prompt.id]

    def rates(self, prompts: Sequence[Prompt]) -> np.ndarray:
        self.prefetch(prompts)
        return np.array([self.cache[p.id] for p in prompts], dtype=float)


NO_ORACLE = (
    "estimator='oracle' needs a pass-rate oracle attached to the strategy's memory "
    "(`strategy.attach(oracle=...)`); it is a benchmark instrument available only in reinforce_ada's own "
    "trainer on exact-answer tasks (task verifier arithmetic or exact) and in `reinforce-ada simulate`; choose "
    "estimator=tracker, predictor or both elsewhere"
)


def missing_oracle() -> ConfigError:
    return ConfigError(NO_ORACLE)


def refuse_oracle(estimator: str, where: str, option: str = "estimator") -> None:
    """An integration that has no oracle to offer refuses `estimator=oracle` at start, naming its own option."""
    if estimator == "oracle":
        raise ConfigError(
            f"{option}='oracle' is not supported by {where}: the pass-rate oracle is a benchmark instrument of "
            "reinforce_ada's own trainer (`reinforce-ada train` / `compare`, exact-answer tasks); choose "
            f"{option}=tracker, predictor or both"
        )
