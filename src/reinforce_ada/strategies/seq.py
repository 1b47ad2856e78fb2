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

Streaming (`reinforce_ada.streaming`): each prompt runs its own sequence of batches of M with no barrier across
prompts. Batch j is the prompt's submissions j*M .. (j+1)*M - 1 (capped at N_max); it is checked when all of them
have arrived, in submission order, whatever order they finished in -- so the sequence of exit checks, and every
check's pool, is round mode's. `prefetch=False`: the next batch is queued after the check. `prefetch=True`: a prompt
keeps M samples in flight (one more is queued per arrival), so its next batch runs while the current one finishes;
when the check retires the prompt, those samples are cancelled (`in_flight="cancel"`: pools identical in law to round
mode) or added to the pool as they arrive (`"keep"`: larger pools, same exit decisions, see `streaming`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reinforce_ada.strategies.base import PoolStrategy, downsample, split_correct
from reinforce_ada.types import Group, Prompt, Request, Sample


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

    # -- streaming: per-prompt batches, no round barrier (module docstring) -------------------------------------
    def stream_begin(self, prompts: Sequence[Prompt], **opts: Any) -> None:
        super().stream_begin(prompts, **opts)
        ids = list(self.prompts)
        self.submitted = dict.fromkeys(ids, 0)
        self.arrived = dict.fromkeys(ids, 0)
        self.checked = dict.fromkeys(ids, 0)
        """Samples covered by exit checks so far (a prefix of the submissions)."""
        self.checks = dict.fromkeys(ids, 0)
        self._early: dict[str, dict[int, Sample]] = {pid: {} for pid in ids}
        self._live = set(ids)
        self._dirty = dict.fromkeys(ids)  # ordered set: prompts whose requests may have changed

    def next_requests(self, pid: str) -> int:
        """Samples prompt `pid` should queue now (never past N_max, counting those in flight)."""
        c = self.cfg
        room = c.max_samples - self.submitted[pid]
        if self.prefetch:
            return max(0, min(c.samples_per_round - (self.submitted[pid] - self.arrived[pid]), room))
        return min(c.samples_per_round, room) if self.submitted[pid] == self.checked[pid] else 0

    def stream_propose(self) -> list[Request]:
        requests = []
        for pid in self._dirty:
            k = self.next_requests(pid) if pid in self._live else 0
            if k > 0:
                self.submitted[pid] += k
                requests.append(Request(self.prompts[pid], k))
        self._dirty = {}
        return requests

    def stream_observe(self, samples: Sequence[Sample]) -> list[str]:
        cancel = []
        for s in samples:
            self._stream_check(s)
            pid = s.prompt_id
            self.arrived[pid] += 1
            if pid not in self._live:  # a late sample of a retired prompt
                self._late(s)
                continue
            self._early[pid][s.index] = s
            if not self._advance(pid):
                self._dirty[pid] = None
                continue
            for late in sorted(self._early.pop(pid).values(), key=lambda x: x.index):
                self._late(late)
            if self.in_flight == "cancel" and self.submitted[pid] > self.arrived[pid]:
                cancel.append(pid)
        return cancel

    def _late(self, s: Sample) -> None:
        if self.in_flight == "keep":
            s.round = s.index // self.cfg.samples_per_round
            self._pool_insert(s)
        else:
            self.stream_discarded += 1

    def _advance(self, pid: str) -> bool:
        """Merge every complete batch into the pool and check the exit rule after each; True once the prompt stops."""
        c, early = self.cfg, self._early[pid]
        while True:
            start = self.checked[pid]
            end = min(start + c.samples_per_round, c.max_samples)
            if end > self.submitted[pid] or any(t not in early for t in range(start, end)):
                return False
            for t in range(start, end):
                s = early.pop(t)
                s.round = self.checks[pid]
                self._pool_insert(s)
            self.checked[pid], self.checks[pid] = end, self.checks[pid] + 1
            if self.retired(pid) or end >= c.max_samples:
                self._live.discard(pid)
                self.active.remove(pid)
                return True

    def stream_end(self) -> None:
        # round mode's bookkeeping, per batch index: prompts still active after their j-th check
        self.rounds = max(self.checks.values(), default=0)
        self.active_per_round = [sum(n > j + 1 for n in self.checks.values()) for j in range(self.rounds)]
