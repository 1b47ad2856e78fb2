"""Reinforce-Ada-Seq: sample in rounds, retire prompts once their exit rule holds, downsample to n.

1) Every active prompt draws `samples_per_round` (M) samples per round, never more than `max_samples` (N_max) in
   total for the step.
2) After each round a prompt retires when it has >= k_pos correct samples (`exit="positive"`), or >= k_pos correct
   and >= k_neg wrong ones (`exit="balanced"`). "Correct" means reward > `threshold`.
3) Each pool is downsampled to n (n//2 correct, the rest wrong, filled from the other side when one is short).
   The baseline is computed later from the whole pool (`Group.pool_rewards`), see `reinforce_ada.advantages`.
4) Prompts that reach the cap unresolved are kept and downsampled (`unresolved="keep"`, the official code: a uniform
   pool then gives zero advantage but still counts in the token-mean denominator) or dropped (`"drop"`).
Departures: k_pos/k_neg generalise the official code's hard-wired rules (positive: 1 correct; balanced: n//2 and
n - n//2); the kept subset is drawn at random by default (`selection="earliest"` reproduces the official code).
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.strategies.base import PoolStrategy, downsample, split_correct
from reinforce_ada.types import Group, Request


def exit_holds(n_pos: int, n_neg: int, *, exit: str, k_pos: int, k_neg: int) -> bool:
    if exit == "positive":
        return n_pos >= k_pos
    return n_pos >= k_pos and n_neg >= k_neg


class Seq(PoolStrategy):
    def propose(self) -> list[Request]:
        c = self.cfg
        requests = []
        for pid in self.active:
            k = min(c.samples_per_round, c.max_samples - len(self.pools[pid]))
            if k > 0:
                requests.append(Request(self.prompts[pid], k))
        return requests

    def retired(self, pid: str) -> bool:
        pos, neg = split_correct(self.pools[pid], self.cfg.threshold)
        c = self.cfg
        return exit_holds(len(pos), len(neg), exit=c.exit, k_pos=c.resolved_k_pos, k_neg=c.resolved_k_neg)

    def _after_round(self) -> None:
        self.active = [
            pid for pid in self.active if not self.retired(pid) and len(self.pools[pid]) < self.cfg.max_samples
        ]

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
