"""`select=value` (ours, `sampling.value`) as an admission rule: MoPPS's candidates and posterior, ranked by the
expected signal per generated token of a visit under the planner's exact law for this sampler.

`value_offered` / `value_selected` in `metrics()` are the step's mean value of the candidates considered and of those
kept (0 in a step with no candidates).
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.sampling.admission.rule import AdmissionRule, RuleContext
from reinforce_ada.sampling.value import value_choose
from reinforce_ada.types import Prompt

_SUMS = ("offered", "offered_n", "selected", "selected_n")


class Value(AdmissionRule):
    ranks = True

    def __init__(self, opts: Any, ctx: RuleContext):
        super().__init__(opts, ctx)
        self.table = ctx.law()  # built with the strategy, not at its first step (seq with give_up: seconds)
        self.sums = dict.fromkeys(_SUMS, 0.0)

    def reset_step(self) -> None:
        self.sums = dict.fromkeys(_SUMS, 0.0)

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        if not candidates:
            return [], None
        ctx = self.ctx
        chosen, offered, kept = value_choose(candidates, k, ctx.memory, ctx.rng, self.table, self.opts.select_explore)
        v = self.sums
        v["offered"] += float(offered.sum())
        v["offered_n"] += len(offered)
        v["selected"] += float(kept.sum())
        v["selected_n"] += len(kept)
        return chosen, None

    def metrics(self) -> dict[str, Any]:
        v = self.sums
        return {
            "value_offered": v["offered"] / v["offered_n"] if v["offered_n"] else 0.0,
            "value_selected": v["selected"] / v["selected_n"] if v["selected_n"] else 0.0,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"value_sums": dict(self.sums)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sums = dict(state.get("value_sums") or dict.fromkeys(_SUMS, 0.0))  # absent before select=value
