"""Reinforce-Ada-Seq: sample in batches of M, retire prompts once their exit rule holds, downsample to n.

1) Every sampling prompt draws `samples_per_round` (M) samples per batch, never more than `max_samples` (N_max) in
   total for the step.
2) After each batch a prompt retires when it has >= k_pos correct samples (`exit="positive"`), or >= k_pos correct
   and >= k_neg wrong ones (`exit="balanced"`). "Correct" means reward > `threshold`.
3) Each pool is downsampled to n (n//2 correct, the rest wrong, filled from the other side when one is short).
   The baseline is computed later from the whole pool (`Group.pool_rewards`), see `sampling.advantages`.
4) Prompts that reach the cap unresolved are kept and downsampled (`unresolved="keep"`, the official code: a uniform
   pool then gives zero advantage but still counts in the token-mean denominator) or dropped (`"drop"`).
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

from typing import Any

from reinforce_ada.sampling.protocol import PoolStrategy, downsample, split_correct
from reinforce_ada.types import Group


def exit_holds(n_pos: int, n_neg: int, *, exit: str, k_pos: int, k_neg: int) -> bool:
    if exit == "positive":
        return n_pos >= k_pos
    return n_pos >= k_pos and n_neg >= k_neg


class Seq(PoolStrategy):
    def batch_end(self, pid: str) -> int:
        return min(len(self.pools[pid]) + self.cfg.samples_per_round, self.cfg.max_samples)

    def to_submit(self, pid: str) -> int:
        if not self.prefetch:
            return super().to_submit(pid)
        c, sent = self.cfg, self.submitted[pid]
        return max(0, min(c.samples_per_round - (sent - self.arrived[pid]), c.max_samples - sent))

    def on_batch(self, pid: str) -> bool:
        return self.retired(pid) or len(self.pools[pid]) >= self.cfg.max_samples

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
        return {
            **super().metrics(),
            "unresolved_prompts": len(unresolved),
            "dropped_prompts": len(unresolved) if self.cfg.unresolved == "drop" else 0,
        }
