"""The strategy protocol and the machinery every strategy shares.

A strategy is a small stateful object driven by `reinforce_ada.rollout.collect`:
1) `begin(prompts)` is told the step's prompts;
2) `wanted_prompts()` may ask for fresh prompts (DAPO refills), which arrive through `add_prompts`;
3) `propose()` says how many samples each prompt gets next, as `Request(prompt, k)`s;
4) `observe(samples)` receives them scored; `done()` says when sampling stops;
5) `build()` returns the training groups (kept samples + the whole pool + a per-prompt weight).
`state_dict()` / `load_state_dict()` round-trip exactly (mid-step state included); `metrics()` reports the step.

Streaming (`reinforce_ada.streaming.collect_streaming`, no round barrier) drives the `stream_*` hooks instead of
`propose/observe`: `stream_begin`, `stream_wanted_prompts` / `stream_add_prompts`, `stream_propose` (requests to
queue now), `stream_observe(samples)` (arrivals in completion order; returns prompt ids whose queued and in-flight
samples should be cancelled) and `stream_end`. The defaults below replay the round protocol over a streaming engine
(a round is submitted at once and observed when its last sample arrives), which is exact for one-round strategies
(uniform, est); `Seq` and `Dynamic` override them to act per prompt. Mid-step streaming state is not checkpointed:
the trainer checkpoints between steps.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Protocol

import numpy as np

from reinforce_ada.config import StrategyConfig
from reinforce_ada.types import Group, Prompt, Request, Sample


class Strategy(Protocol):
    cfg: StrategyConfig

    def begin(self, prompts: Sequence[Prompt]) -> None: ...
    def wanted_prompts(self) -> int: ...
    def add_prompts(self, prompts: Sequence[Prompt]) -> None: ...
    def propose(self) -> list[Request]: ...
    def observe(self, samples: Sequence[Sample]) -> None: ...
    def done(self) -> bool: ...
    def build(self) -> list[Group]: ...
    def metrics(self) -> dict[str, Any]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def split_correct(pool: Sequence[Sample], threshold: float) -> tuple[list[Sample], list[Sample]]:
    pos = [s for s in pool if float(s.reward) > threshold]  # type: ignore[arg-type]
    neg = [s for s in pool if not float(s.reward) > threshold]  # type: ignore[arg-type]
    return pos, neg


def downsample(
    pool: Sequence[Sample], n: int, *, threshold: float, selection: str, rng: np.random.Generator
) -> list[Sample]:
    """Keep min(n, |pool|) samples, n//2 correct and n - n//2 wrong where possible, filling from the other side.

    `selection="earliest"` takes the first samples in arrival order (the official code); `"random"` draws a seeded
    uniform subset of each side, so the kept group is not biased toward the first round's samples.
    """
    pos, neg = split_correct(pool, threshold)
    k = min(n, len(pool))
    take_pos = min(k // 2, len(pos))
    take_neg = min(k - take_pos, len(neg))
    take_pos = min(k - take_neg, len(pos))  # fill the gap from the positives when negatives run short

    def pick(side: list[Sample], m: int) -> list[Sample]:
        if selection == "earliest" or m >= len(side):
            return side[:m]
        idx = np.sort(rng.choice(len(side), size=m, replace=False))
        return [side[i] for i in idx]

    kept = pick(pos, take_pos) + pick(neg, take_neg)
    return sorted(kept, key=lambda s: s.index)


class PoolStrategy:
    """Per-step bookkeeping shared by all strategies: prompts, pools, rounds, and the active set."""

    def __init__(self, cfg: StrategyConfig):
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self._reset([])

    # -- step state ---------------------------------------------------------------------------------------------
    def _reset(self, prompts: Sequence[Prompt]) -> None:
        self.prompts: dict[str, Prompt] = {}
        self.pools: dict[str, list[Sample]] = {}
        self.active: list[str] = []
        self.rounds = 0
        self.active_per_round: list[int] = []
        self.exhausted = False
        self.add_prompts(prompts)

    def begin(self, prompts: Sequence[Prompt]) -> None:
        ids = [p.id for p in prompts]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"duplicate prompt ids in one step: {dup[:5]}")
        self._reset(prompts)

    def add_prompts(self, prompts: Sequence[Prompt]) -> None:
        if not prompts:
            self.exhausted = True
        for p in prompts:
            if p.id in self.prompts:
                raise ValueError(f"prompt id {p.id!r} is already in this step")
            self.prompts[p.id] = p
            self.pools[p.id] = []
            self.active.append(p.id)

    def wanted_prompts(self) -> int:
        return 0

    def observe(self, samples: Sequence[Sample]) -> None:
        for s in samples:
            if s.prompt_id not in self.pools:
                raise ValueError(f"sample for unknown prompt {s.prompt_id!r}")
            if s.reward is None:
                raise ValueError(f"sample of prompt {s.prompt_id!r} reached the strategy unscored")
            pool = self.pools[s.prompt_id]
            s.round, s.index = self.rounds, len(pool)
            pool.append(s)
        self.rounds += 1
        self._after_round()
        self.active_per_round.append(len(self.active))

    def _after_round(self) -> None:
        raise NotImplementedError

    def done(self) -> bool:
        return not self.active

    def first_round_rewards(self) -> dict[str, list[float]]:
        return {pid: [float(s.reward) for s in pool if s.round == 0] for pid, pool in self.pools.items() if pool}

    def metrics(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "active_prompts_per_round": list(self.active_per_round)}

    # -- checkpointing ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "prompts": [asdict(p) for p in self.prompts.values()],
            "pools": {pid: [asdict(s) for s in pool] for pid, pool in self.pools.items()},
            "active": list(self.active),
            "rounds": self.rounds,
            "active_per_round": list(self.active_per_round),
            "exhausted": self.exhausted,
            "extra": self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.prompts = {d["id"]: Prompt(**d) for d in state["prompts"]}
        self.pools = {pid: [Sample(**d) for d in pool] for pid, pool in state["pools"].items()}
        self.active = list(state["active"])
        self.rounds = state["rounds"]
        self.active_per_round = list(state["active_per_round"])
        self.exhausted = state["exhausted"]
        self._load_extra_state(state["extra"])

    # -- streaming (see the module docstring) --------------------------------------------------------------------
    def stream_begin(self, prompts: Sequence[Prompt], *, in_flight: str = "cancel", prefetch: bool = False) -> None:
        self.begin(prompts)
        self.in_flight, self.prefetch = in_flight, prefetch
        self.stream_discarded = 0
        """Samples that arrived but joined no pool (late arrivals of a retired prompt under in_flight="cancel")."""
        self._round_wait: list[Sample] = []
        self._round_size = 0

    def stream_wanted_prompts(self) -> int:
        return 0 if self._round_size else self.wanted_prompts()

    def stream_add_prompts(self, prompts: Sequence[Prompt]) -> None:
        self.add_prompts(prompts)

    def stream_propose(self) -> list[Request]:
        if self._round_size or self.done():
            return []
        requests = self.propose()
        self._round_size = sum(r.k for r in requests)
        return requests

    def stream_observe(self, samples: Sequence[Sample]) -> list[str]:
        self._round_wait += samples
        if len(self._round_wait) >= self._round_size:
            # `index` holds the per-prompt submission ordinal, so each pool gets round mode's order back
            batch = sorted(self._round_wait, key=lambda s: s.index)
            self._round_wait, self._round_size = [], 0
            self.observe(batch)
        return []

    def stream_end(self) -> None:
        pass

    def _stream_check(self, s: Sample) -> None:
        if s.prompt_id not in self.pools:
            raise ValueError(f"sample for unknown prompt {s.prompt_id!r}")
        if s.reward is None:
            raise ValueError(f"sample of prompt {s.prompt_id!r} reached the strategy unscored")

    def _pool_insert(self, s: Sample) -> None:
        """Add a streamed sample to its pool in submission order (its `index`), whatever order it arrived in."""
        insort(self.pools[s.prompt_id], s, key=lambda x: x.index)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        pass
