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

from math import exp, lgamma
from typing import Any

from reinforce_ada.sampling.protocol import PoolStrategy, downsample, split_correct
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


def exit_holds(n_pos: int, n_neg: int, *, exit: str, k_pos: int, k_neg: int) -> bool:
    if exit == "positive":
        return n_pos >= k_pos
    return n_pos >= k_pos and n_neg >= k_neg


def resolve_chance(n_pos: int, n_neg: int, remaining: int, a: float, b: float, *, k_pos: int, k_neg: int) -> float:
    """P(the next `remaining` samples bring >= k_pos - n_pos correct and >= k_neg - n_neg wrong) when the pass rate
    is Beta(a + n_pos, b + n_neg) distributed (a Beta-binomial tail; k_neg = 0 for the positive exit)."""
    need_pos, need_neg = max(0, k_pos - n_pos), max(0, k_neg - n_neg)
    if need_pos + need_neg > remaining:
        return 0.0
    a, b, r = a + n_pos, b + n_neg, remaining
    log_beta_ab = lgamma(a) + lgamma(b) - lgamma(a + b)
    total = 0.0
    for j in range(need_pos, r - need_neg + 1):
        log_comb = lgamma(r + 1) - lgamma(j + 1) - lgamma(r - j + 1)
        total += exp(log_comb + lgamma(j + a) + lgamma(r - j + b) - lgamma(r + a + b) - log_beta_ab)
    return min(1.0, total)


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
    traits = Traits(
        baseline="global",
        streams=True,
        spends_budget=False,
        planner="sequential",
        reads=("n", "samples_per_round", "max_samples", "exit", "k_pos", "k_neg", "selection", "unresolved", "give_up"),
    )

    def _reset(self) -> None:
        super()._reset()
        self.prior: dict[str, tuple[float, float]] = {}
        self.given_up: dict[str, None] = {}

    def on_add(self, ids: list[str]) -> None:
        if self.cfg.give_up > 0:  # frozen for the step: every check of the prompt sees the same prior
            self.memory.prefetch([self.prompts[pid] for pid in ids])
            self.prior.update({pid: self.memory.posterior(self.prompts[pid]) for pid in ids})

    def batch_end(self, pid: str) -> int:
        return min(len(self.pools[pid]) + self.cfg.samples_per_round, self.cfg.max_samples)

    def to_submit(self, pid: str) -> int:
        if not self.prefetch:
            return super().to_submit(pid)
        c, sent = self.cfg, self.submitted[pid]
        return max(0, min(c.samples_per_round - (sent - self.arrived[pid]), c.max_samples - sent))

    def on_batch(self, pid: str) -> bool:
        if self.retired(pid) or len(self.pools[pid]) >= self.cfg.max_samples:
            return True
        if self.cfg.give_up > 0 and self.resolve_chance(pid) < self.cfg.give_up:
            self.given_up[pid] = None
            return True
        return False

    def resolve_chance(self, pid: str) -> float:
        c = self.cfg
        pos, neg = split_correct(self.pools[pid], c.threshold)
        a, b = self.prior[pid]
        left = c.max_samples - len(self.pools[pid])
        return resolve_chance(len(pos), len(neg), left, a, b, k_pos=c.resolved_k_pos, k_neg=c.resolved_k_neg)

    def retired(self, pid: str) -> bool:
        pos, neg = split_correct(self.pools[pid], self.cfg.threshold)
        c = self.cfg
        return exit_holds(len(pos), len(neg), exit=c.exit, k_pos=c.resolved_k_pos, k_neg=c.resolved_k_neg)

    def unresolved_ids(self) -> list[str]:
        return [pid for pid, pool in self.pools.items() if pool and not self.retired(pid)]

    def build(self) -> list[Group]:
        c = self.cfg
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
            "dropped_prompts": len(unresolved) if self.cfg.unresolved == "drop" else 0,
        }
        if self.cfg.give_up > 0:
            out["given_up_prompts"] = len(self.given_up)
            out["given_up_samples"] = sum(len(self.pools[pid]) for pid in self.given_up)
        return out

    def _extra_state(self) -> dict[str, Any]:
        return {"prior": {k: list(v) for k, v in self.prior.items()}, "given_up": list(self.given_up)}

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        self.prior = {k: (float(v[0]), float(v[1])) for k, v in extra.get("prior", {}).items()}
        self.given_up = dict.fromkeys(extra.get("given_up", []))
