"""DAPO dynamic sampling: n samples per prompt, drop zero-variance groups, refill with fresh prompts.

1) Each generation batch draws n samples for as many fresh prompts as the step's batch size.
2) A group whose reward variance is <= `variance_tol` is dropped (a variance test, so float rewards work; a
   mean-range test such as 0 < mean < 1 would wrongly keep or drop partial-credit groups).
3) Batches are drawn until `batch size` groups with signal are kept or `max_gen_batches` is reached; the kept groups
   are trimmed to the batch size. A step that could not fill its batch trains on what it has and says so in
   `metrics()["batch_filled"]`.
Streaming (`reinforce_ada.streaming`): a prompt is judged as soon as its n samples arrive, and the next generation
batch is queued as soon as it is certain to be needed -- when prompts drawn - groups dropped < batch size, which can
only become more true as results arrive -- instead of after the whole batch finishes. The batches drawn, and so the
statistics, are round mode's; kept groups are trimmed in prompt order, as in round mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.strategies.base import PoolStrategy
from reinforce_ada.types import Group, Prompt, Request, Sample


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

    # -- streaming (module docstring) ----------------------------------------------------------------------------
    def stream_begin(self, prompts: Sequence[Prompt], **opts: Any) -> None:
        super().stream_begin(prompts, **opts)
        self.gen_batches = 1 if prompts else 0  # batches started (round mode counts finished ones; equal at the end)
        self._batch_of = dict.fromkeys(self.prompts, 0)
        self._queued = list(self.prompts)

    def stream_wanted_prompts(self) -> int:
        if self.exhausted or self.gen_batches >= self.cfg.max_gen_batches:
            return 0
        return self.batch_size if len(self.prompts) - len(self.dropped) < self.batch_size else 0

    def stream_add_prompts(self, prompts: Sequence[Prompt]) -> None:
        self.add_prompts(prompts)
        if prompts:
            for p in prompts:
                self._batch_of[p.id] = self.gen_batches
                self._queued.append(p.id)
            self.gen_batches += 1

    def stream_propose(self) -> list[Request]:
        requests = [Request(self.prompts[pid], self.cfg.n) for pid in self._queued]
        self._queued = []
        return requests

    def stream_observe(self, samples: Sequence[Sample]) -> list[str]:
        for s in samples:
            self._stream_check(s)
            s.round = self._batch_of[s.prompt_id]
            self._pool_insert(s)
            if len(self.pools[s.prompt_id]) == self.cfg.n:
                self._judge(s.prompt_id)
        return []

    def _judge(self, pid: str) -> None:
        rewards = np.array([float(s.reward) for s in self.pools[pid]])
        (self.kept if rewards.var() > self.cfg.variance_tol else self.dropped).append(pid)
        self.active.remove(pid)

    def stream_end(self) -> None:
        order = {pid: i for i, pid in enumerate(self.prompts)}
        self.kept.sort(key=order.__getitem__)
        self.dropped.sort(key=order.__getitem__)
        self.rounds, self.active_per_round = self.gen_batches, [0] * self.gen_batches
