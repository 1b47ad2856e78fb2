"""Pilot-Commit (arXiv 2605.26606, databricks/pilot-commit `recipe/pc`): a cheap pilot decides where the budget goes.

1) Every candidate prompt draws `pilot` samples (the paper's exploration n: 32 of 128; here 8 of max_samples 32).
2) A prompt whose pilot pass rate lies in [commit_lo, commit_hi] (paper 0.125 and 1 - 0.25) is committed: it draws
   up to `max_samples` in all and is trained on every sample, pilot included, with GRPO's group baseline and std.
3) A prompt below the band is deferred (not trained; the prompt source offers it again in a later epoch), one above
   it is not trained, and one whose pass rate reaches `evict` (paper: 1.0, all correct) is evicted: the admission
   stage (`strategies.select`) skips it in every later step.
4) Candidates keep coming until `batch size` prompts are committed or `max_gen_batches` x batch size candidates have
   been drawn; then the step trains on what is committed (`metrics()["batch_filled"]`).
Refills: when prompts fail their pilot, exactly the deficit batch size - (drawn - failed) is asked for, so no more
prompts can pass than the batch holds and nothing committed is thrown away; the round and streaming drivers draw
the same prompts in the same order, so the same law.
Departures from the paper's code:
- Commit samples are drawn in the same step as the pilot, from the same policy. The paper commits a prompt in a
  later generation call, possibly steps later, from a replay buffer of passed pilots (stale by up to 4 steps,
  `buffer_max_off_steps`); there the pilot samples trained on are off-policy. We have no replay buffer and no
  off-policy pilot samples.
- The paper draws candidates in generation batches of 3x the train batch, up to 10 of them, and fails the step if
  the batch is still not full; we ask for the deficit, cap candidates at max_gen_batches (default 3) x batch size
  and train on a partial batch instead. `pilot_commit:max_gen_batches=10` matches the paper's cap.
- The paper's `max_variance` choice of which buffered prompts (and which pilot samples) to commit does not arise:
  every passing prompt is committed with all its pilot samples (its n_explore_effective default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reinforce_ada.sampling.protocol import PoolStrategy, split_correct
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt


class PilotCommit(PoolStrategy):
    traits = Traits(
        baseline="group",
        streams=False,
        spends_budget=False,
        planner="pilot",
        reads=("pilot", "commit_lo", "commit_hi", "max_samples", "max_gen_batches"),
        default_evict=1.0,
    )

    def _reset(self) -> None:
        super()._reset()
        self.batch_size = 0
        self.committed: dict[str, None] = {}
        self.failed: dict[str, str] = {}
        """prompt id -> "deferred" (below the band) or "too_easy" (above it)."""

    def begin(self, prompts: Sequence[Prompt], **opts: Any) -> None:
        super().begin(prompts, **opts)
        self.batch_size = len(prompts)

    def batch_end(self, pid: str) -> int:
        return self.cfg.max_samples if pid in self.committed else self.cfg.pilot

    def on_batch(self, pid: str) -> bool:
        if pid in self.committed:
            return True
        pool, c = self.pools[pid], self.cfg
        rate = len(split_correct(pool, c.threshold)[0]) / len(pool)
        if c.commit_lo <= rate <= c.commit_hi:
            self.committed[pid] = None
            return len(pool) >= c.max_samples
        self.failed[pid] = "deferred" if rate < c.commit_lo else "too_easy"
        return True

    def wanted_prompts(self) -> int:
        if self.exhausted or not self.prompts:
            return 0
        drawn, cap = len(self.prompts), self.cfg.max_gen_batches * self.batch_size
        return max(0, min(self.batch_size - (drawn - len(self.failed)), cap - drawn))

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool])  # type: ignore[arg-type]
            for pid, pool in self.pools.items()
            if pid in self.committed and pool
        ]

    def metrics(self) -> dict[str, Any]:
        failed = list(self.failed.values())
        pilot = sum(min(len(pool), self.cfg.pilot) for pool in self.pools.values())
        return {
            **super().metrics(),
            "gen_batches": self.waves + 1 if self.prompts else 0,
            "batch_filled": len(self.committed) >= self.batch_size,
            "committed_prompts": len(self.committed),
            "deferred_prompts": failed.count("deferred"),
            "too_easy_prompts": failed.count("too_easy"),
            "pilot_samples": pilot,
            "commit_samples": sum(len(pool) for pool in self.pools.values()) - pilot,
        }

    def _extra_state(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "committed": list(self.committed), "failed": dict(self.failed)}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        self.batch_size = extra["batch_size"]
        self.committed, self.failed = dict.fromkeys(extra["committed"]), dict(extra["failed"])
