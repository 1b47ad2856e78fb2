"""GRPO-n: every prompt gets n samples in one batch, all of them trained on."""

from __future__ import annotations

from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


class Uniform(PoolStrategy):
    traits = Traits(baseline="group", streams=False, spends_budget=False, planner="group", reads=("n",))

    @classmethod
    def cost_hint(cls, cfg: StrategyConfig) -> float:
        return float(cfg.n)

    def batch_end(self, pid: str) -> int:
        return self.cfg.n

    def on_batch(self, pid: str) -> bool:
        return True

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]) for pid, pool in self.pools.items()
        ]
