"""Prompt order: seeded shuffled epochs, no prompt twice in one step, checkpointable (`PromptOrder.take`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from reinforce_ada.types import Prompt


class PromptOrder:
    def __init__(self, prompts: Sequence[Prompt], seed: int = 0):
        if not prompts:
            raise ValueError("the prompt pool is empty")
        self.prompts = list(prompts)
        self.rng = np.random.default_rng(seed)
        self.queue: deque[int] = deque()
        self.epoch = 0

    def take(self, k: int, exclude: Collection[str] = ()) -> list[Prompt]:
        """Next k prompts in epoch order, skipping ids in `exclude` and repeats; fewer only if the pool runs out."""
        out: list[Prompt] = []
        seen = set(exclude)
        deferred: list[int] = []
        for _ in range(2 * len(self.prompts) + k):
            if len(out) == k:
                break
            if not self.queue:
                self.queue.extend(self.rng.permutation(len(self.prompts)).tolist())
                self.epoch += 1
            i = self.queue.popleft()
            if self.prompts[i].id in seen:
                deferred.append(i)  # served first in the next draw, so no prompt is skipped for an epoch
                continue
            seen.add(self.prompts[i].id)
            out.append(self.prompts[i])
        self.queue.extendleft(reversed(deferred))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "queue": list(self.queue), "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.queue = deque(state["queue"])
        self.epoch = state["epoch"]
