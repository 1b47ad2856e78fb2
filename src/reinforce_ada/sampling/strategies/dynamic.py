"""DAPO dynamic sampling: n samples per prompt, drop zero-variance groups, refill with fresh prompts.

1) Each generation batch draws n samples for as many fresh prompts as the step's batch size.
2) A group whose reward variance is <= `variance_tol` is dropped (a variance test, so float rewards work; a
   mean-range test such as 0 < mean < 1 would wrongly keep or drop partial-credit groups).
3) Batches are drawn until `batch size` groups with signal are kept or `max_gen_batches` is reached; the kept groups
   are trimmed to the batch size, in prompt order. A step that could not fill its batch trains on what it has and
   says so in `metrics()["batch_filled"]`.
A prompt is judged as soon as its n samples arrive, and the next generation batch is wanted as soon as it is
certain to be needed -- prompts drawn - groups dropped < batch size, which can only become more true as results
arrive. Under the round driver that is after the whole batch, as in DAPO; under the streaming driver it is earlier,
and the batches drawn, so the statistics, are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.checks import at_least
from reinforce_ada.sampling.options import Options, option
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt


@dataclass(frozen=True)
class DynamicOptions(Options):
    max_gen_batches: int = option(3, "most generation batches per step before training on a partial batch")
    variance_tol: float = option(1e-8, "a group with reward variance <= tol is dropped", plan=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least("max_gen_batches", self.max_gen_batches, 1)
        at_least("variance_tol", self.variance_tol, 0.0)


class Dynamic(PoolStrategy):
    traits = Traits(streams=False, planner="group", drops_uniform=True)
    Options = DynamicOptions
    opts: DynamicOptions
    METRICS = {
        "gen_batches": "Generation batches drawn this step: the first and each refill (at most max_gen_batches).",
        "batch_filled": "Whether batch-size groups with signal were kept (false: the step trained on a partial batch).",
        "overflow_prompts": "Groups with signal beyond the batch size, not trained on (not counted as no signal).",
    }

    @classmethod
    def cost_hint(cls, opts: DynamicOptions) -> float:
        return float(opts.n * opts.max_gen_batches)

    def _reset(self) -> None:
        super()._reset()
        self.batch_size, self.kept, self.dropped = 0, [], []

    def begin(self, prompts: Sequence[Prompt], **opts: Any) -> None:
        super().begin(prompts, **opts)
        self.batch_size = len(prompts)

    def batch_end(self, pid: str) -> int:
        return self.opts.n

    def on_batch(self, pid: str) -> bool:
        rewards = np.array([float(s.reward) for s in self.pools[pid]])  # type: ignore[arg-type]
        (self.kept if rewards.var() > self.opts.variance_tol else self.dropped).append(pid)
        return True

    @property
    def gen_batches(self) -> int:
        return self.waves + 1 if self.prompts else 0

    def wanted_prompts(self) -> int:
        if self.exhausted or self.gen_batches >= self.opts.max_gen_batches:
            return 0
        return self.batch_size if len(self.prompts) - len(self.dropped) < self.batch_size else 0

    def _in_prompt_order(self, ids: list[str]) -> list[str]:
        order = {pid: i for i, pid in enumerate(self.prompts)}
        return sorted(ids, key=order.__getitem__)

    def build(self) -> list[Group]:
        groups = []
        for pid in self._in_prompt_order(self.kept)[: self.batch_size]:
            pool = self.pools[pid]
            groups.append(Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool]))
        return groups

    def metrics(self) -> dict[str, Any]:
        return {
            **super().metrics(),
            "gen_batches": self.gen_batches,
            "batch_filled": len(self.kept) >= self.batch_size,
            "dropped_prompts": len(self.dropped),
            "overflow_prompts": max(0, len(self.kept) - self.batch_size),
        }

    def _extra_state(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "kept": self.kept, "dropped": self.dropped}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        self.batch_size = extra["batch_size"]
        self.kept, self.dropped = list(extra["kept"]), list(extra["dropped"])
