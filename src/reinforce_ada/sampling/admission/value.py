"""`select=value`: admit the candidate prompts whose next visit buys the most expected signal per generated token.

Each candidate is valued by the planner's exact law for the sampler the selection sits in front of
(`sampling.law.value_table`; the law and how it is integrated over a candidate's Beta are written there):
value(x) = E_p[P(signal | p)] / (E_p[E[samples | p]] * t(x)), t(x) the prompt's expected completion length.
1) Selection (`value_choose`): the k candidates of highest value, ties by candidate order, from `candidates` x k
   candidates (MoPPS's field), as the `Admission` mixin collects them; unselected candidates wait for the source.
2) Exploration: `select_explore` = e in [0, 1]. Each candidate, with probability e, is valued at a Thompson draw
   theta ~ Beta(a, b) -- P(signal | theta) / (E[samples | theta] t(x)) -- instead of the posterior expectation.
   e = 0 (default) is greedy on the expectation and uses no random numbers; e = 1 values every candidate at a draw,
   MoPPS's exploration with this value in place of MoPPS's distance to a target pass rate.
Departures: this rule is ours. It keeps MoPPS's selection (a Beta posterior per prompt, candidates x k offered,
the best k kept) and replaces its criterion, |theta - 0.5|, by the planner's exact signal per token for the
sampler in use. For uniform n with an exact rate the two agree (1 - p^n - (1 - p)^n peaks at p = 0.5); they differ
for adaptive samplers (seq spends more samples on hard prompts, so its value per token peaks above 0.5), for
uncertain beliefs (an expectation over the Beta, not one draw) and for prompts of different lengths.

3) `value_offered` / `value_selected` in `metrics()` are the step's mean value of the candidates considered and of
   those kept (0 in a step with no candidates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.admission.rule import AdmissionRule, RankingOptions, RuleContext
from reinforce_ada.sampling.checks import unit
from reinforce_ada.sampling.fields import option
from reinforce_ada.sampling.law import ValueTable
from reinforce_ada.types import Prompt

_SUMS = ("offered", "offered_n", "selected", "selected_n")


@dataclass(frozen=True)
class ValueOptions(RankingOptions):
    select_explore: float = option(
        0.0,
        "share of candidates valued at a Thompson draw from their pass-rate posterior instead of the posterior "
        "expectation (0: greedy on expected signal per token; 1: every candidate Thompson-sampled)",
        plan=False,
    )

    def check(self) -> None:
        super().check()
        unit("select_explore", self.select_explore)


def candidate_values(
    table: ValueTable, candidates: list[Prompt], memory: Any, rng: np.random.Generator, explore: float
) -> np.ndarray:
    """Each candidate's expected signal per generated token (module docstring); `explore` > 0 draws from `rng`."""
    memory.prefetch(candidates)  # an oracle's rates: one batched call
    ab = np.array([memory.posterior(p) for p in candidates], dtype=float).reshape(-1, 2)
    tokens = np.array([memory.tokens_per_sample(p) for p in candidates], dtype=float)
    sig, smp = table.expect(ab[:, 0], ab[:, 1])
    if explore > 0 and len(candidates):
        draw = rng.random(len(candidates)) < explore
        theta = rng.beta(ab[:, 0], ab[:, 1])
        t_sig, t_smp = table.at(theta)
        sig, smp = np.where(draw, t_sig, sig), np.where(draw, t_smp, smp)
    return sig / (smp * tokens)


def value_choose(
    candidates: list[Prompt], k: int, memory: Any, rng: np.random.Generator, table: ValueTable, explore: float
) -> tuple[list[Prompt], np.ndarray, np.ndarray]:
    """The k candidates of highest value (ties by candidate order), in candidate order; also every candidate's value
    and the chosen ones' (for the metrics)."""
    values = candidate_values(table, candidates, memory, rng, explore)
    best = np.sort(np.lexsort((np.arange(len(candidates)), -values))[:k])
    return [candidates[i] for i in best], values, values[best]


class Value(AdmissionRule):
    ranks = True
    Options = ValueOptions
    METRICS = {
        "value_offered": "Mean value (expected signal per token) of the candidates considered this step (0 if none).",
        "value_selected": "Mean value of the candidates admitted this step (0 if none).",
    }

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
