"""GRPO-n: every prompt gets n samples in one batch, all of them trained on (the group's mean and std as baseline)."""

from __future__ import annotations

from reinforce_ada.sampling.options import Options
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


class Uniform(PoolStrategy):
    traits = Traits(streams=False, planner="group")
    Options = Options  # the shared options alone: n, threshold, baseline (group, std), memory, admission

    def batch_end(self, pid: str) -> int:
        return self.opts.n

    def on_batch(self, pid: str) -> bool:
        return True

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]) for pid, pool in self.pools.items()
        ]
