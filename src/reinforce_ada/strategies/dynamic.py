"""DAPO dynamic sampling: n samples per prompt, drop zero-variance groups, refill with fresh prompts.

1) Each generation batch draws n samples for as many fresh prompts as the step's batch size.
2) A group whose reward variance is <= `variance_tol` is dropped (a variance test, so float rewards work; a
   mean-range test such as 0 < mean < 1 would wrongly keep or drop partial-credit groups).
3) Batches are drawn until `batch size` groups with signal are kept or `max_gen_batches` is reached; the kept groups
   are trimmed to the batch size. A step that could not fill its batch trains on what it has and says so in
   `metrics()["batch_filled"]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.strategies.base import PoolStrategy
from reinforce_ada.types import Group, Prompt, Request


class Dynamic(PoolStrategy):
    def propose(self) -> list[Request]:
        return [Request(self.prompts[pid], self.cfg.n) for pid in self.active]

    def _after_round(self) -> None:
        self.gen_batches += 1
        for pid in self.active:
            rewards = np.array([float(s.reward) for s in self.pools[pid]])
            (self.kept if rewards.var() > self.cfg.variance_tol else self.dropped).append(pid)
        self.active = []

    def _full(self) -> bool:
        return len(self.kept) >= self.batch_size

    def wanted_prompts(self) -> int:
        if self.active or self._full() or self.exhausted or self.gen_batches >= self.cfg.max_gen_batches:
            return 0
        return self.batch_size

    def done(self) -> bool:
        return not self.active and self.wanted_prompts() == 0

    def first_round_rewards(self) -> dict[str, list[float]]:
        first = {pid for pid, pool in self.pools.items() if pool and pool[0].round == 0}
        return {pid: r for pid, r in super().first_round_rewards().items() if pid in first}

    def build(self) -> list[Group]:
        groups = []
        for pid in self.kept[: self.batch_size]:
            pool = self.pools[pid]
            groups.append(Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]))
        return groups

    def metrics(self) -> dict[str, Any]:
        return {
            **super().metrics(),
            "gen_batches": self.gen_batches,
            "batch_filled": self._full(),
            "dropped_prompts": len(self.dropped),
            "overflow_prompts": max(0, len(self.kept) - self.batch_size),
        }

    def _extra_state(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "gen_batches": self.gen_batches,
            "kept": self.kept,
            "dropped": self.dropped,
        }

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        self.batch_size, self.gen_batches = extra["batch_size"], extra["gen_batches"]
        self.kept, self.dropped = list(extra["kept"]), list(extra["dropped"])

    def _reset(self, prompts: Sequence[Prompt]) -> None:
        super()._reset(prompts)
        self.batch_size, self.gen_batches, self.kept, self.dropped = len(prompts), 0, [], []
