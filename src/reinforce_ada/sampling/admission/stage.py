"""The admission stage in front of any strategy: collect candidates, apply eviction and the `select` rule.

`with_admission(Base)` returns `Base` with the `Admission` mixin in front of it, so a selection rule is written once
(`sampling.admission.registry`) and composes with every sampler (`seq:select=greso`, `est:select=mopps`,
`pilot_commit`'s eviction), through the one protocol and no special case in the drivers:
1) The mixin stands between the driver and the strategy. When the strategy needs k prompts (the step's batch at
   `begin`, or k more when it asks through `wanted_prompts`, e.g. DAPO's refills), the mixin collects candidates --
   the offered prompts, then more from the driver's prompt source through its own `wanted_prompts` /
   `add_prompts` -- drops those eviction or the rule's `keep` rejects, and hands the strategy k of the rest
   (`begin` once per step, `add_prompts` after). A skip rule asks for just the deficit; a ranking rule (MoPPS,
   value, iw) for `candidates` x k, and keeps the k it `choose`s.
2) Nothing is sampled while candidates are collected, so both drivers see the same admitted prompts and the same
   law. A candidate offered twice in one step (a source that wrapped into its next epoch) is not counted again; a
   source that offers nothing new, or nothing at all, ends the collection and the strategy gets what there is.
3) Skipped and unselected prompts are counted in `metrics()` (`offered_prompts`, `skipped_prompts`, ...); they are
   not in `strategy.prompts`, so the ledger's prompts and no-signal share count sampled prompts only.
4) `evict` (Pilot-Commit): skip a prompt the memory evicted (a visit pass rate >= `evict`), in every later step.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

import numpy as np

from reinforce_ada.sampling.admission.registry import admission_rule
from reinforce_ada.sampling.admission.rule import RuleContext
from reinforce_ada.sampling.law import value_table
from reinforce_ada.sampling.options import resolved_evict
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.types import Group, Prompt

_COUNTS = ("offered", "skipped_evicted", "skipped_rule", "unselected")

METRICS: dict[str, str] = {
    "offered_prompts": "Distinct prompts the source offered to the admission stage this step.",
    "skipped_prompts": "Offered prompts not admitted: evicted, skipped by the rule, or not chosen.",
    "skipped_evicted": "Offered prompts skipped because the memory evicted them (evict, Pilot-Commit's solved ones).",
    "evicted_total": "Prompts the memory has evicted so far in the run.",
    "unselected_prompts": "Only with a ranking rule (select=mopps, value, iw, priority): candidates not chosen.",
}
"""The stage's keys (with `select` other than none, or `evict`); the rule's own are its class's `METRICS`. Module
level, not on `Admission`: the mixin stands before the strategy in the MRO and would hide the strategy's."""


class Admission(PoolStrategy, abstract=True):
    """The mixin of the module docstring; use through `with_admission`."""

    sampler: type[PoolStrategy]
    """The strategy behind the stage (its law prices candidates for select=value and iw)."""

    def __init__(self, cfg: Any, **kwargs: Any):
        super().__init__(cfg, **kwargs)
        self.admit_rng = np.random.default_rng([cfg.seed, 17])
        ctx = RuleContext(self.memory, self.admit_rng, lambda: value_table(self.sampler, self.opts))
        self.rule = admission_rule(self.opts.select)(self.opts, ctx)
        self.evicting = resolved_evict(self.opts) is not None
        self._reset_admission()

    def _reset_admission(self) -> None:
        self.filling, self.first, self.dry, self.need = False, True, False, 0
        self.candidates: list[Prompt] = []
        self.offered: dict[str, None] = {}
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.opts_begin: dict[str, Any] = {}
        self.rule.reset_step()

    # -- the protocol, in front of the strategy ---------------------------------------------------------------------
    def begin(self, prompts: list[Prompt], **opts: Any) -> None:
        self._reset_admission()
        if not prompts:
            self.first = False
            super().begin(prompts, **opts)
            return
        self.rule.start_step()
        self.opts_begin = opts
        self._reset()  # last step's prompts are gone while candidates are collected
        self.filling, self.need = True, len(prompts)
        self._offer(prompts)

    def wanted_prompts(self) -> int:
        if self.filling:
            return 0 if self.dry else max(0, self._target(self.need) - len(self.candidates))
        return self._target(super().wanted_prompts())

    def add_prompts(self, prompts: list[Prompt]) -> None:
        if not self.filling:
            self.filling, self.need = True, super().wanted_prompts()
        self._offer(prompts)

    def _target(self, k: int) -> int:
        return k * self.opts.candidates if self.rule.ranks else k

    def _offer(self, prompts: list[Prompt]) -> None:
        new = [p for p in prompts if p.id not in self.offered and p.id not in self.prompts]
        self.dry = not new
        for p in new:
            self.offered[p.id] = None
            self.counts["offered"] += 1
            if self.evicting and p.id in self.memory.evicted:
                self.counts["skipped_evicted"] += 1
            elif not self.rule.keep(p):
                self.counts["skipped_rule"] += 1
            else:
                self.candidates.append(p)
        if self.dry or len(self.candidates) >= self._target(self.need):
            self._finish_fill()

    def _finish_fill(self) -> None:
        chosen, _ = self.rule.choose(self.candidates, self.need)
        self.counts["unselected"] += len(self.candidates) - len(chosen)
        self.filling, self.dry, self.candidates = False, False, []
        if self.first:
            self.first = False
            super().begin(chosen, **self.opts_begin)
        else:
            super().add_prompts(chosen)  # [] tells the strategy the source is exhausted

    def build(self) -> list[Group]:
        groups = super().build()
        w = self.rule.group_weights()  # rides Group.weight: advantages -> StepBatch.weights -> the loss
        for g in groups:
            g.weight *= w.get(g.prompt.id, 1.0)
        return groups

    # -- metrics and checkpointing ----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        c = self.counts
        out = {
            **super().metrics(),
            "offered_prompts": c["offered"],
            "skipped_prompts": c["skipped_evicted"] + c["skipped_rule"] + c["unselected"],
            "skipped_evicted": c["skipped_evicted"],
            "evicted_total": len(self.memory.evicted),
        }
        if self.rule.ranks:
            out["unselected_prompts"] = c["unselected"]
        return {**out, **self.rule.metrics()}

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "admission": {
                "filling": self.filling,
                "first": self.first,
                "dry": self.dry,
                "need": self.need,
                "candidates": [asdict(p) for p in self.candidates],
                "offered": list(self.offered),
                "counts": dict(self.counts),
                "opts": dict(self.opts_begin),
                "rng": self.admit_rng.bit_generator.state,
                **self.rule.state_dict(),
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        a = state["admission"]
        self.filling, self.first, self.dry, self.need = a["filling"], a["first"], a["dry"], a["need"]
        self.candidates = [Prompt(**p) for p in a["candidates"]]
        self.offered = dict.fromkeys(a["offered"])
        counts = dict(a["counts"])
        if "skipped_greso" in counts:  # states written by 0.3 named the rule's skips after GRESO
            counts["skipped_rule"] = counts.pop("skipped_greso")
        self.counts, self.opts_begin = counts, dict(a["opts"])
        self.admit_rng.bit_generator.state = a["rng"]
        self.rule.load_state_dict(a)


@cache
def with_admission(base: type[PoolStrategy]) -> type[PoolStrategy]:
    """`base` with prompt admission in front (one class per base, built once)."""
    attrs = {"__doc__": f"{base.__name__} with prompt admission", "sampler": base}
    return type(f"Admitted{base.__name__}", (Admission, base), attrs)


def needs_admission(opts: Any) -> bool:
    return opts.select != "none" or resolved_evict(opts) is not None
