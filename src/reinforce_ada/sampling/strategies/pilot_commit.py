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
from dataclasses import dataclass
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least, check_group, unit
from reinforce_ada.sampling.options import Options, option, same_as
from reinforce_ada.sampling.protocol import PoolStrategy, split_correct
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt


@dataclass(frozen=True)
class PilotCommitOptions(Options):
    """Pilot-Commit's options (module docstring), at the paper's settings where our sizes allow; GRPO's baseline."""

    pilot: int = option(8, "pilot samples per prompt (paper 32 of 128: a quarter of max_samples)")
    commit_lo: float = option(0.125, "commit when the pilot pass rate is >= commit_lo (paper 0.125)")
    commit_hi: float = option(0.75, "... and <= commit_hi (paper 1 - 0.25)")
    max_samples: int = option(32, "samples a committed prompt draws in all, pilot included")
    max_gen_batches: int = option(3, "candidate prompts per step <= this x batch size (paper 10)")
    evict: float | None = same_as(Options, "evict", 1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_group(self.n, self.max_samples)
        at_least("max_gen_batches", self.max_gen_batches, 1)
        at_least("pilot", self.pilot, 1)
        if self.pilot > self.max_samples:
            raise ConfigError(
                f"pilot={self.pilot} must be <= max_samples={self.max_samples} (the pilot is part of the cap)"
            )
        unit("commit_lo", self.commit_lo)
        unit("commit_hi", self.commit_hi)
        if self.commit_lo > self.commit_hi:
            raise ConfigError(
                f"commit_lo={self.commit_lo} must be <= commit_hi={self.commit_hi} (the commit band is empty)"
            )


class PilotCommit(PoolStrategy):
    traits = Traits(streams=False, planner="pilot")
    Options = PilotCommitOptions
    opts: PilotCommitOptions
    METRICS = {
        "gen_batches": "Candidate batches drawn this step: the first and each refill of the deficit.",
        "batch_filled": "Whether batch-size prompts were committed (false: the step trained on a partial batch).",
        "committed_prompts": "Prompts whose pilot pass rate fell in [commit_lo, commit_hi]: trained on.",
        "deferred_prompts": "Prompts whose pilot pass rate was below commit_lo: not trained, offered again later.",
        "too_easy_prompts": "Prompts whose pilot pass rate was above commit_hi: not trained.",
        "pilot_samples": "Samples drawn by pilots (up to `pilot` per prompt).",
        "commit_samples": "Samples committed prompts drew beyond their pilot.",
    }

    @classmethod
    def cost_hint(cls, opts: PilotCommitOptions) -> float:
        return float(opts.max_samples)

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
        return self.opts.max_samples if pid in self.committed else self.opts.pilot

    def on_batch(self, pid: str) -> bool:
        if pid in self.committed:
            return True
        pool, c = self.pools[pid], self.opts
        rate = len(split_correct(pool, c.threshold)[0]) / len(pool)
        if c.commit_lo <= rate <= c.commit_hi:
            self.committed[pid] = None
            return len(pool) >= c.max_samples
        self.failed[pid] = "deferred" if rate < c.commit_lo else "too_easy"
        return True

    def wanted_prompts(self) -> int:
        if self.exhausted or not self.prompts:
            return 0
        drawn, cap = len(self.prompts), self.opts.max_gen_batches * self.batch_size
        return max(0, min(self.batch_size - (drawn - len(self.failed)), cap - drawn))

    def build(self) -> list[Group]:
        return [
            Group(self.prompts[pid], list(pool), [float(s.reward) for s in pool])  # type: ignore[arg-type]
            for pid, pool in self.pools.items()
            if pid in self.committed and pool
        ]

    def metrics(self) -> dict[str, Any]:
        failed = list(self.failed.values())
        pilot = sum(min(len(pool), self.opts.pilot) for pool in self.pools.values())
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
