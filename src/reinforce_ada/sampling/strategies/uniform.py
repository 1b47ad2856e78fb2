"""GRPO-n: every prompt gets n samples in one batch, all of them trained on (the group's mean and std as baseline).

`second_sample_sd` (ours; off by default) makes the group size a prompt's own: a prompt whose value belief (the
prompt memory's Beta, by `estimator`) has a standard deviation above it when the prompt joins the step draws n + 1
samples instead of n -- a second sample only where the tracker is still unsure, at one unit per prompt plus the
extra draws. It is decided before any of the step's samples, from the belief alone, so both drivers draw the same
law. The planner prices the base n (whether the extra draw fires depends on the prompt's history).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import Options, option
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


@dataclass(frozen=True)
class UniformOptions(Options):
    second_sample_sd: float | None = option(
        None,
        "n + 1 samples for a prompt whose value belief's std is above this when it joins the step (SPO's cold "
        "prior: 0.35); none: off",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        sd = self.second_sample_sd
        if sd is not None and not 0.0 <= sd < 0.5:
            raise ConfigError(
                f"second_sample_sd={sd} is out of range; it must be in [0, 0.5) (a Beta's standard deviation is "
                "below 1/2), or none"
            )


def belief_sd(a: float, b: float) -> float:
    """The standard deviation of Beta(a, b).

    >>> round(belief_sd(0.5, 0.5), 4), round(belief_sd(4.0, 4.0), 4)
    (0.3536, 0.1667)
    """
    s = a + b
    return math.sqrt(a * b / (s * s * (s + 1.0)))


class Uniform(PoolStrategy):
    traits = Traits(streams=False, planner="group")
    Options = UniformOptions
    METRICS = {
        "second_samples": "Only with second_sample_sd: prompts of the step that drew n + 1 samples (a wide belief).",
    }

    def on_add(self, ids: list[str]) -> None:
        sd = self.opts.second_sample_sd
        if sd is None:
            return
        self.memory.prefetch([self.prompts[pid] for pid in ids])
        for pid in ids:  # the belief before the step's samples: both drivers decide alike
            if belief_sd(*self.memory.posterior(self.prompts[pid])) > sd:
                self.extra[pid] = 1

    def batch_end(self, pid: str) -> int:
        return self.opts.n + self.extra.get(pid, 0)

    def on_batch(self, pid: str) -> bool:
        return True

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]) for pid, pool in self.pools.items()
        ]

    def _reset(self) -> None:
        super()._reset()
        self.extra: dict[str, int] = {}
        """Prompts of the step drawing beyond n (second_sample_sd) -> how many more."""

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        return out if self.opts.second_sample_sd is None else {**out, "second_samples": sum(self.extra.values())}

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), **({"second": dict(self.extra)} if self.extra else {})}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        super()._load_extra_state(extra)
        self.extra = {str(k): int(v) for k, v in extra.get("second", {}).items()}
