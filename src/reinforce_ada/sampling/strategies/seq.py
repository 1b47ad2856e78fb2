"""Reinforce-Ada-Seq: sample in batches of M, retire prompts once their exit rule holds, downsample to n.

1) Every sampling prompt draws `samples_per_round` (M) samples per batch, never more than `max_samples` (N_max) in
   total for the step.
2) After each batch a prompt retires when it has >= k_pos correct samples (`exit="positive"`), or >= k_pos correct
   and >= k_neg wrong ones (`exit="balanced"`). "Correct" means reward > `threshold`.
3) Each pool is downsampled to n (n//2 correct, the rest wrong, filled from the other side when one is short).
   The baseline is computed later from the whole pool (`Group.pool_rewards`), see `sampling.advantages`.
4) Prompts that reach the cap unresolved are kept and downsampled (`unresolved="keep"`, the official code: a uniform
   pool then gives zero advantage but still counts in the token-mean denominator) or dropped (`"drop"`).
5) Beyond the paper, `give_up` > 0 stops sampling a prompt after a batch once its chance of meeting the exit rule
   within the cap falls below `give_up`: with the belief Beta(a + pos, b + neg) about its pass rate -- (a, b) the
   prompt memory's posterior at the start of the step (`estimator`: its own earlier visits, the learned predictor,
   or both; Beta(prior_alpha, prior_beta) on a first visit) updated with this step's pool -- the chance is the
   Beta-binomial probability that the remaining max_samples - drawn samples bring the missing correct (and wrong)
   ones. A prompt that can no longer resolve even with perfect luck always stops. Given-up prompts count as
   unresolved (kept or dropped by `unresolved`). Off by default, so the paper's Seq is unchanged.
   When it can act at all: the rule needs evidence that outweighs its prior. On a first visit (prior Beta(1, 1)) the
   most hopeless pool -- every sample wrong -- keeps a chance of 0.52 / 0.23 / 0.053 after 8 / 16 / 24 samples of
   the default cap of 32 (balanced exit, k_pos = k_neg = 2), so `give_up=0.05` never fires on a first visit and
   `give_up=0.1` first fires after 24 samples; after one earlier all-wrong visit of 32 the chances are 0.13 / 0.058 /
   0.013. With a pool offered about twice in a run, give-up therefore acts mostly through a prior that already knows
   the prompt is hard: `estimator=both` (the learned predictor's prior) or many visits. `give_up_point` computes the
   first sample count at which it fires for given settings, and the planner gives its exact law.
Departures: k_pos/k_neg generalise the official code's hard-wired rules (positive: 1 correct; balanced: n//2 and
n - n//2); the kept subset is drawn at random by default (`selection="earliest"` reproduces the official code).

Each prompt runs its own sequence of batches; a batch is checked when all of it has arrived, in submission order
(`sampling.protocol`), so under the round driver this is the paper's synchronous rounds and under the streaming
driver the same checks without a barrier across prompts. `prefetch=False`: the next batch is queued after the check.
`prefetch=True`: a prompt keeps M samples in flight (one more is queued per arrival), so its next batch runs while
the current one finishes; when the check retires the prompt, those samples are cancelled (`in_flight="cancel"`:
pools identical in law to round mode) or join the pool as they arrive (`"keep"`: larger pools, same exit decisions,
see `sampling.streaming`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least, check_group, choice, unit
from reinforce_ada.sampling.law import exit_holds, resolve_chance
from reinforce_ada.sampling.options import Options, option, same_as
from reinforce_ada.sampling.protocol import PoolStrategy, downsample, split_correct
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group

EXITS = ("positive", "balanced")
SELECTIONS = ("random", "earliest")
UNRESOLVED = ("keep", "drop")


@dataclass(frozen=True)
class SeqOptions(Options):
    """Ada-Seq's options (module docstring); the defaults are the paper's experiments (Ada-Seq-balance, M=8,
    N_max=32, n=4, K_pos=K_neg=n/2, the whole pool's mean as baseline, no std)."""

    samples_per_round: int = option(8, "samples drawn per active prompt per round (M)")
    max_samples: int = option(32, "cap on samples per prompt per step (N_max)")
    exit: str = option(
        "balanced", "exit rule: positive (>= k_pos correct) or balanced (>= k_pos correct and >= k_neg wrong)"
    )
    k_pos: int | None = option(
        None, "correct samples needed to retire (default: n//2 balanced, 1 positive as in the official code)"
    )
    k_neg: int | None = option(None, "balanced: wrong samples needed to retire (default: n - n//2)")
    selection: str = option(
        "random", "downsampling: random (seeded) or earliest (arrival order, as the official code)", plan=False
    )
    unresolved: str = option("keep", "prompts that hit the cap unresolved: keep (official) or drop (no loss dilution)")
    give_up: float = option(
        0.0,
        "stop sampling a prompt once its posterior chance of meeting the exit rule within max_samples falls below "
        "this (0 = off, the paper)",
    )
    advantage: str = same_as(Options, "advantage", "global")
    scale_std: bool = same_as(Options, "scale_std", False)

    @property
    def resolved_k_pos(self) -> int:
        if self.k_pos is not None:
            return self.k_pos
        return self.n // 2 if self.exit == "balanced" else 1

    @property
    def resolved_k_neg(self) -> int:
        if self.exit == "positive":
            return 0
        return self.k_neg if self.k_neg is not None else self.n - self.n // 2

    def __post_init__(self) -> None:
        super().__post_init__()
        choice("exit", self.exit, EXITS)
        choice("selection", self.selection, SELECTIONS)
        choice("unresolved", self.unresolved, UNRESOLVED)
        at_least("samples_per_round", self.samples_per_round, 1)
        at_least("max_samples", self.max_samples, 1)
        check_group(self.n, self.max_samples)
        if self.k_pos is not None:
            at_least("k_pos", self.k_pos, 0)
        if self.k_neg is not None:
            at_least("k_neg", self.k_neg, 0)
        need = self.resolved_k_pos + self.resolved_k_neg
        if need < 1:
            raise ConfigError(
                f"k_pos + k_neg = 0 (exit={self.exit!r}): every prompt would retire before its first sample; "
                "set k_pos >= 1 (or k_neg >= 1)"
            )
        if need > self.max_samples:
            raise ConfigError(
                f"k_pos + k_neg = {need} exceeds max_samples={self.max_samples}: no prompt could ever retire"
            )
        unit("give_up", self.give_up, open_hi=True)


def give_up_point(
    *, max_samples: int, samples_per_round: int, k_pos: int, k_neg: int, give_up: float, a: float, b: float
) -> int | None:
    """The first pool size (a batch boundary) at which a prompt whose samples were all wrong is given up, under the
    prior Beta(a, b); None when it never is before the cap. An all-wrong pool is the strongest case for giving up,
    so no prompt is given up earlier than this."""
    drawn = samples_per_round
    while drawn < max_samples:
        if resolve_chance(0, drawn, max_samples - drawn, a, b, k_pos=k_pos, k_neg=k_neg) < give_up:
            return drawn
        drawn += samples_per_round
    return None


class Seq(PoolStrategy):
    traits = Traits(streams=True, planner="sequential")
    Options = SeqOptions
    opts: SeqOptions
    METRICS = {
        "given_up_prompts": "Only with give_up > 0: prompts that stopped early, their chance to resolve below give_up.",
        "given_up_samples": "Only with give_up > 0: samples the given-up prompts drew.",
    }

    @classmethod
    def cost_hint(cls, opts: SeqOptions) -> float:
        return float(opts.max_samples)

    @classmethod
    def check_training(cls, opts: SeqOptions, batch_size: int) -> None:
        if opts.samples_per_round > opts.max_samples:
            raise ConfigError(
                f"strategy.samples_per_round={opts.samples_per_round} is larger than strategy.max_samples="
                f"{opts.max_samples}: seq could never draw a full round; lower samples_per_round or raise max_samples"
            )

    def _reset(self) -> None:
        super()._reset()
        self.prior: dict[str, tuple[float, float]] = {}
        self.given_up: dict[str, None] = {}

    def on_add(self, ids: list[str]) -> None:
        if self.opts.give_up > 0:  # frozen for the step: every check of the prompt sees the same prior
            self.memory.prefetch([self.prompts[pid] for pid in ids])
            self.prior.update({pid: self.memory.posterior(self.prompts[pid]) for pid in ids})

    def batch_end(self, pid: str) -> int:
        return min(len(self.pools[pid]) + self.opts.samples_per_round, self.opts.max_samples)

    def to_submit(self, pid: str) -> int:
        if not self.prefetch:
            return super().to_submit(pid)
        c, sent = self.opts, self.submitted[pid]
        return max(0, min(c.samples_per_round - (sent - self.arrived[pid]), c.max_samples - sent))

    def on_batch(self, pid: str) -> bool:
        if self.retired(pid) or len(self.pools[pid]) >= self.opts.max_samples:
            return True
        if self.opts.give_up > 0 and self.resolve_chance(pid) < self.opts.give_up:
            self.given_up[pid] = None
            return True
        return False

    def resolve_chance(self, pid: str) -> float:
        c = self.opts
        pos, neg = split_correct(self.pools[pid], c.threshold)
        a, b = self.prior[pid]
        left = c.max_samples - len(self.pools[pid])
        return resolve_chance(len(pos), len(neg), left, a, b, k_pos=c.resolved_k_pos, k_neg=c.resolved_k_neg)

    def retired(self, pid: str) -> bool:
        pos, neg = split_correct(self.pools[pid], self.opts.threshold)
        c = self.opts
        return exit_holds(len(pos), len(neg), exit=c.exit, k_pos=c.resolved_k_pos, k_neg=c.resolved_k_neg)

    def unresolved_ids(self) -> list[str]:
        return [pid for pid, pool in self.pools.items() if pool and not self.retired(pid)]

    def build(self) -> list[Group]:
        c = self.opts
        groups = []
        for pid, pool in self.pools.items():
            resolved = self.retired(pid)
            if not pool or (not resolved and c.unresolved == "drop"):
                continue
            kept = downsample(pool, c.n, threshold=c.threshold, selection=c.selection, rng=self.rng)
            groups.append(Group(self.prompts[pid], kept, [float(s.reward) for s in pool], resolved=resolved))
        return groups

    def metrics(self) -> dict[str, Any]:
        unresolved = self.unresolved_ids()
        out = {
            **super().metrics(),
            "unresolved_prompts": len(unresolved),
            "dropped_prompts": len(unresolved) if self.opts.unresolved == "drop" else 0,
        }
        if self.opts.give_up > 0:
            out["given_up_prompts"] = len(self.given_up)
            out["given_up_samples"] = sum(len(self.pools[pid]) for pid in self.given_up)
        return out

    def _extra_state(self) -> dict[str, Any]:
        return {"prior": {k: list(v) for k, v in self.prior.items()}, "given_up": list(self.given_up)}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        self.prior = {k: (float(v[0]), float(v[1])) for k, v in extra.get("prior", {}).items()}
        self.given_up = dict.fromkeys(extra.get("given_up", []))
