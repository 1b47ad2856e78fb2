"""GRPO-n: every prompt gets n samples in one round, all of them trained on."""

from __future__ import annotations

from reinforce_ada.strategies.base import PoolStrategy
from reinforce_ada.types import Group, Request


class Uniform(PoolStrategy):
    def propose(self) -> list[Request]:
        return [Request(self.prompts[pid], self.cfg.n) for pid in self.active]

    def _after_round(self) -> None:
        self.active = []

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]) for pid, pool in self.pools.items()
        ]
