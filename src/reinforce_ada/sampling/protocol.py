"""The one strategy protocol, and the per-prompt bookkeeping every strategy shares.

A strategy is told prompts, proposes requests, observes scored samples as they arrive, says when it is done and
builds the training groups. Both drivers (`sampling.rounds`, `sampling.streaming`) speak only this:
1) `begin(prompts, in_flight=, prefetch=)` starts a step; `wanted_prompts()` may ask for fresh prompts (DAPO
   refills), handed over by `add_prompts(prompts)` (an empty list: the source is exhausted);
2) `propose()` returns the requests to submit now, `Request(prompt, k)`, given what is already outstanding;
3) `observe(samples)` takes scored samples in any order, each numbered by the driver with its per-prompt
   submission ordinal in `Sample.index`; it returns ids of prompts that stopped with samples still outstanding,
   for the driver to cancel (under `in_flight="cancel"`);
4) `done()`: no prompt is sampling and no prompt is wanted; `build()` returns the groups; `metrics()` the step's;
5) `state_dict()` / `load_state_dict()` round-trip exactly, mid-step included (JSON-serialisable).
`PoolStrategy` implements all of it, and owns the strategy's cross-step `PromptMemory` (`sampling.memory`): a step
starts the memory's next step, and a prompt that stops sampling is recorded there as one visit. A subclass says where
each of a prompt's batches ends (`batch_end`) and whether the prompt stops after a batch (`on_batch`): a batch joins the
prompt's pool in submission order once all of it has arrived, so every decision sees the same pools whatever order
samples finish in, and a driver that waits for every outstanding sample (round mode) and one that does not (streaming)
draw from the same law. Samples that arrive after their prompt stopped (only possible with prefetch) join the pool
(`in_flight="keep"`) or are discarded ("cancel").
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import NEEDS_VALUE
from reinforce_ada.sampling.length import cap_for, capped
from reinforce_ada.sampling.memory import PassRateOracle, PromptMemory, Scorer
from reinforce_ada.sampling.options import Options
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt, Request, Sample

if TYPE_CHECKING:
    from reinforce_ada.sampling.config import StrategyConfig

IN_FLIGHT = ("cancel", "keep")


class Strategy(Protocol):
    cfg: StrategyConfig

    def begin(self, prompts: Sequence[Prompt], *, in_flight: str = "cancel", prefetch: bool = False) -> None: ...
    def wanted_prompts(self) -> int: ...
    def add_prompts(self, prompts: Sequence[Prompt]) -> None: ...
    def propose(self) -> list[Request]: ...
    def observe(self, samples: Sequence[Sample]) -> list[str]: ...
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


def sample_state(s: Sample) -> dict[str, Any]:
    """A sample as JSON; `prompt_tokens` only when an engine set it (states written before it existed read alike)."""
    d = asdict(s)
    if not d["prompt_tokens"]:
        del d["prompt_tokens"]
    return d


_COUNTERS = ("wave", "submitted", "arrived", "checks")


class PoolStrategy:
    """The protocol's mechanics over per-prompt pools (module docstring); subclasses implement the algorithm.

    Per prompt: `wave` (0 = given to `begin`, w = brought by the w-th `add_prompts`), `submitted`, `arrived`, `checks`
    (batches merged), `early` (arrived, not yet merged). A sample's `round` is wave + the index of its batch, so round
    mode's global round counter and streaming's per-prompt batches give the same numbers.

    A concrete subclass declares `traits` (`sampling.traits.Traits`: streaming default, planner, predictor) and
    `Options` (its options class, `sampling.options`: what it reads, with its defaults), or inherits them;
    `class Base(PoolStrategy, abstract=True)` opts an intermediate class out. `self.opts` is the step's options,
    `self.cfg` the whole `StrategyConfig` (name, options, seed).
    """

    traits: ClassVar[Traits]
    Options: ClassVar[type[Options]] = Options
    select_fixed: ClassVar[bool] = False
    """The name is its admission rule (greso, mopps): another `select` contradicts it."""
    METRICS: ClassVar[dict[str, str]] = {}
    """The keys `metrics()` adds beyond the ledger's fields (`sampling.ledger.Ledger`), each with its one-line
    definition (docs/metrics.md is generated from these); a key that depends on an option is a pattern, `qhat_{k}`,
    and one written only under a condition says "Only with ...:". A subclass that adds keys declares
    `METRICS = {**Base.METRICS, ...}`. This class's own (`rounds`, `active_prompts_per_round`) are ledger fields."""

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        if not isinstance(getattr(cls, "traits", None), Traits):
            raise TypeError(
                f"strategy class {cls.__name__} declares no `traits = Traits(...)` (reinforce_ada.sampling.traits: "
                "streams, planner); subclass a concrete strategy to inherit them, or pass abstract=True for an "
                "intermediate base"
            )
        if not (isinstance(cls.Options, type) and issubclass(cls.Options, Options) and is_dataclass(cls.Options)):
            raise TypeError(
                f"strategy class {cls.__name__}: Options = {cls.Options!r} must be a dataclass subclassing "
                "reinforce_ada.sampling.options.Options"
            )

    @classmethod
    def validate(cls, opts: Any) -> None:
        """Checks across this strategy's options beyond each option's own (raise ConfigError)."""

    @classmethod
    def check_training(cls, opts: Any, batch_size: int) -> None:
        """Checks that apply when training with `batch_size` prompts per step (Est: its budget must give every
        prompt its minimum); the trainer's config calls it (raise ConfigError)."""

    @classmethod
    def plan_counts(cls, rates: np.ndarray, opts: Any, budget: int) -> np.ndarray:
        """planner="allocation": samples per prompt for a batch at these (exact) pass rates."""
        raise NotImplementedError(f"{cls.__name__} has planner={cls.traits.planner!r}, not 'allocation'")

    @classmethod
    def cost_hint(cls, opts: Any) -> float:
        """Most samples a prompt can cost in one step (`compare` schedules its longest runs first with it; the
        planner refuses more than it can enumerate)."""
        return float(opts.n)

    def __init__(self, cfg: StrategyConfig):
        if not isinstance(cfg.options, self.Options):
            raise ConfigError(
                f"strategy {cfg.name!r} ({type(self).__name__}) takes {self.Options.__name__}, not "
                f"{type(cfg.options).__name__}; build configs with sampling.configure.strategy_config"
            )
        self.cfg = cfg
        self.opts = cfg.options
        self.rng = np.random.default_rng(cfg.seed)
        self.memory = PromptMemory(self.opts)
        self._reset()

    def attach(
        self,
        *,
        oracle: PassRateOracle | None = None,
        scorer: Scorer | None = None,
        prior_rates: dict[str, float] | None = None,
    ) -> None:
        """What the caller provides beside the samples (`PromptMemory.attach`): the exact pass rates behind
        `estimator=oracle`, the policy's log-probs of earlier responses behind `forgetting=drift`, prior means
        measured by sampling."""
        self.memory.attach(oracle=oracle, scorer=scorer, prior_rates=prior_rates)

    # -- the algorithm (subclasses) ------------------------------------------------------------------------------
    def batch_end(self, pid: str) -> int:
        """Pool size after the prompt's next batch: where its next decision is taken."""
        raise NotImplementedError

    def on_batch(self, pid: str) -> bool:
        """A batch has joined the pool: return True to stop sampling the prompt."""
        raise NotImplementedError

    def build(self) -> list[Group]:
        raise NotImplementedError

    def to_submit(self, pid: str) -> int:
        """Samples to queue now: the next batch once the current one is merged (nothing outstanding)."""
        if self.submitted[pid] != len(self.pools[pid]):
            return 0
        return self.batch_end(pid) - self.submitted[pid]

    def wanted_prompts(self) -> int:
        return 0

    # -- the protocol ---------------------------------------------------------------------------------------------
    def _reset(self) -> None:
        self.prompts: dict[str, Prompt] = {}
        self.pools: dict[str, list[Sample]] = {}
        self.wave: dict[str, int] = {}
        self.submitted: dict[str, int] = {}
        self.arrived: dict[str, int] = {}
        self.checks: dict[str, int] = {}
        self.early: dict[str, dict[int, Sample]] = {}
        self.live: dict[str, None] = {}
        """Prompts still sampling (an ordered set)."""
        self.dirty: dict[str, None] = {}
        """Prompts whose requests may have changed since the last `propose`."""
        self.waves = 0
        self.exhausted = False
        self.discarded = 0
        """Samples that arrived after their prompt stopped and joined no pool (in_flight="cancel")."""
        self.values: dict[str, float] = {}
        """advantage="tracker": each prompt's value estimate when it joined the step, before its samples."""
        self.caps: dict[str, int] = {}
        """length_cap: each prompt's cap on a sample this step (`sampling.length`)."""
        self.in_flight, self.prefetch = "cancel", False

    def begin(self, prompts: Sequence[Prompt], *, in_flight: str = "cancel", prefetch: bool = False) -> None:
        if in_flight not in IN_FLIGHT:
            raise ConfigError(f"in_flight={in_flight!r} is not valid; choose one of {list(IN_FLIGHT)}")
        ids = [p.id for p in prompts]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"duplicate prompt ids in one step: {dup[:5]}")
        self._reset()
        self.in_flight, self.prefetch = in_flight, prefetch
        self.exhausted = not prompts
        if prompts:
            self.memory.new_step()
        self._add(prompts)

    def add_prompts(self, prompts: Sequence[Prompt]) -> None:
        if not prompts:
            self.exhausted = True
            return
        self.waves += 1
        self._add(prompts)

    def _add(self, prompts: Sequence[Prompt]) -> None:
        for p in prompts:
            if p.id in self.prompts:
                raise ValueError(f"prompt id {p.id!r} is already in this step")
            self.prompts[p.id], self.pools[p.id], self.early[p.id] = p, [], {}
            self.wave[p.id], self.submitted[p.id], self.arrived[p.id], self.checks[p.id] = self.waves, 0, 0, 0
            self.live[p.id] = self.dirty[p.id] = None
        if self.opts.advantage in NEEDS_VALUE and prompts:
            self.memory.prefetch(list(prompts))
            self.values.update((p.id, self.memory.value(p)) for p in prompts)  # the expected reward
        for p in prompts:  # length_cap: each prompt's own, from the memory before its samples (`sampling.length`)
            if (cap := cap_for(self.opts, self.memory, p)) is not None:
                self.caps[p.id] = cap
        if self.memory.drift is not None and prompts:  # forgetting="drift": how far the policy moved since
            self.memory.drift.prepare(list(prompts))
        self.on_add([p.id for p in prompts])

    def on_add(self, ids: list[str]) -> None:
        """New prompts joined the step (Est allocates their samples here)."""

    def propose(self) -> list[Request]:
        requests = []
        for pid in self.dirty:
            k = self.to_submit(pid) if pid in self.live else 0
            if k > 0:
                self.submitted[pid] += k
                requests.append(Request(self.prompts[pid], k, self.caps.get(pid)))
        self.dirty = {}
        return requests

    def observe(self, samples: Sequence[Sample]) -> list[str]:
        stopped = []
        for s in samples:
            pid = self._check(s)
            if capped(s, self.caps.get(pid)):  # cut at its own cap: wrong, whatever the verifier said
                s.reward = 0.0
            self.arrived[pid] += 1
            if pid not in self.live:
                self._late(s)
                continue
            self.early[pid][s.index] = s
            if not self._merge(pid):
                self.dirty[pid] = None
                continue
            for late in sorted(self.early[pid].values(), key=lambda x: x.index):
                self._late(late)
            self.early[pid] = {}
            if self.in_flight == "cancel" and self.submitted[pid] > self.arrived[pid]:
                stopped.append(pid)
        return stopped

    def done(self) -> bool:
        return not self.live and self.wanted_prompts() == 0

    def _check(self, s: Sample) -> str:
        pid = s.prompt_id
        if pid not in self.pools:
            raise ValueError(f"sample for unknown prompt {pid!r}")
        if s.reward is None:
            raise ValueError(f"sample of prompt {pid!r} reached the strategy unscored")
        if not 0 <= s.index < self.submitted[pid] or s.index in self.early[pid]:
            raise ValueError(f"sample #{s.index} of prompt {pid!r} was never proposed or arrived twice")
        return pid

    def _merge(self, pid: str) -> bool:
        """Merge every complete batch into the pool, in submission order; True once the prompt stops."""
        pool, early = self.pools[pid], self.early[pid]
        while True:
            start, end = len(pool), self.batch_end(pid)
            if end > self.submitted[pid] or any(t not in early for t in range(start, end)):
                return False
            for t in range(start, end):
                s = early.pop(t)
                s.round = self.wave[pid] + self.checks[pid]
                pool.append(s)
            self.checks[pid] += 1
            if self.on_batch(pid):
                del self.live[pid]
                rewards = [float(x.reward) for x in pool]  # type: ignore[arg-type]
                outcomes = [r > self.opts.threshold for r in rewards]
                first = (pool[0].token_ids, pool[0].logprobs)  # forgetting="drift" remembers it
                tokens = [x.num_tokens for x in pool]
                self.memory.record(self.prompts[pid], outcomes, tokens=tokens, response=first, rewards=rewards)
                return True

    def _late(self, s: Sample) -> None:
        if self.in_flight == "keep":
            s.round = self.wave[s.prompt_id] + self.checks[s.prompt_id]
            insort(self.pools[s.prompt_id], s, key=lambda x: x.index)
        else:
            self.discarded += 1

    # -- what the ledger reads ------------------------------------------------------------------------------------
    def first_round_rewards(self) -> dict[str, list[float]]:
        """Rewards of round 0 per prompt that sampled in it (the unbiased pass-rate estimate the paper plots)."""
        out = {pid: [s.reward for s in pool if s.round == 0] for pid, pool in self.pools.items()}
        return {pid: [float(x) for x in r] for pid, r in out.items() if r}  # type: ignore[arg-type]

    def metrics(self) -> dict[str, Any]:
        spans = [(self.wave[p], self.wave[p] + self.checks[p]) for p in self.prompts]
        rounds = max((end for _, end in spans), default=0)
        # prompts still sampling after round r: they sampled in it and sample again in round r + 1
        active = [sum(w <= r and end > r + 1 for w, end in spans) for r in range(rounds)]
        out = {"rounds": rounds, "active_prompts_per_round": active}
        return out if self.memory.drift is None else {**out, **self.memory.drift.metrics()}

    # -- checkpointing ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "prompts": [asdict(p) for p in self.prompts.values()],
            "pools": {pid: [sample_state(s) for s in pool] for pid, pool in self.pools.items()},
            "early": {pid: [sample_state(s) for s in e.values()] for pid, e in self.early.items()},
            **{name: dict(getattr(self, name)) for name in _COUNTERS},
            "live": list(self.live),
            "dirty": list(self.dirty),
            "waves": self.waves,
            "exhausted": self.exhausted,
            "discarded": self.discarded,
            "in_flight": self.in_flight,
            "prefetch": self.prefetch,
            "memory": self.memory.state_dict(),
            "values": dict(self.values),
            **({"caps": dict(self.caps)} if self.caps else {}),
            "extra": self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.prompts = {d["id"]: Prompt(**d) for d in state["prompts"]}
        self.pools = {pid: [Sample(**d) for d in pool] for pid, pool in state["pools"].items()}
        self.early = {pid: {d["index"]: Sample(**d) for d in e} for pid, e in state["early"].items()}
        for name in _COUNTERS:
            setattr(self, name, dict(state[name]))
        self.live, self.dirty = dict.fromkeys(state["live"]), dict.fromkeys(state["dirty"])
        self.waves, self.exhausted, self.discarded = state["waves"], state["exhausted"], state["discarded"]
        self.in_flight, self.prefetch = state["in_flight"], state["prefetch"]
        if "memory" in state:  # checkpoints from before the memory have none
            self.memory.load_state_dict(state["memory"])
        self.values = {k: float(v) for k, v in state.get("values", {}).items()}  # absent before the tracker baseline
        self.caps = {k: int(v) for k, v in state.get("caps", {}).items()}
        self._load_extra_state(state["extra"])

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        pass
