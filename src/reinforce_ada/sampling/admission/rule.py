"""The one signature of an admission rule: `Rule(opts, ctx)`, asked per step which offered prompts to hand over.

A rule is one class (`select=NAME` names it in `sampling.admission.registry.ADMISSIONS`), in one file with its options:
0) `Options`: a frozen dataclass of the rule's own options (`sampling.fields.FeatureOptions`; a ranking rule's
   subclass `RankingOptions`, which brings `candidates`), or None. They exist only while `select` names the rule:
   the strategy's options are composed with them (`sampling.options.options_class`), so `self.opts` reads them.
1) `ranks`: False -- the rule only skips (`keep(prompt)`), and the collector asks the source for exactly the
   deficit; True -- it collects `candidates` x k candidates and `choose`s k of them (MoPPS, value, iw).
2) `reset_step()` as every step begins (per-step counters); `start_step()` as a step with prompts starts (GRESO
   adapts to the last step's visits);
   `keep(prompt)` before a candidate is collected; `choose(candidates, k)` -> (the chosen, in candidate order, and
   a raw weight per chosen prompt, or None); `group_weights()` -> prompt id -> the factor its trained group's weight
   is multiplied by (select=iw's self-normalised Horvitz-Thompson weights; empty for the others).
3) `metrics()`, and `state_dict()` / `load_state_dict(state)`: the rule's keys inside the admission state (JSON).
The context carries what a rule may read: the strategy's prompt memory, the admission stage's own generator and the
sampler's per-visit law on a grid of pass rates (`sampling.law.ValueTable`, built on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from reinforce_ada.sampling.checks import at_least, fits_memory
from reinforce_ada.sampling.fields import FeatureOptions, option
from reinforce_ada.sampling.law import ValueTable
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class RankingOptions(FeatureOptions):
    """What every ranking rule reads (`ranks = True`): how many candidates it ranks per prompt trained."""

    candidates: int = option(
        16, "candidate prompts the rule ranks per prompt it admits (MoPPS's paper: 16)", plan=False
    )

    def check(self) -> None:
        at_least("candidates", self.candidates, 1)
        fits_memory("candidates", self.candidates, 1024, "candidate prompts drawn per prompt a step takes")


@dataclass
class RuleContext:
    memory: PromptMemory
    rng: np.random.Generator
    law: Callable[[], ValueTable]
    """The sampler's value table (`sampling.law.value_table`), computed when first asked for."""


class AdmissionRule:
    """No selection: every offered prompt is admitted, in the order offered (`select=none`)."""

    ranks: ClassVar[bool] = False
    Options: ClassVar[type[FeatureOptions] | None] = None
    METRICS: ClassVar[dict[str, str]] = {}
    """The keys `metrics()` returns, each with its one-line definition (as `PoolStrategy.METRICS`)."""

    def __init__(self, opts: Any, ctx: RuleContext):
        self.opts, self.ctx = opts, ctx

    def reset_step(self) -> None:
        pass

    def start_step(self) -> None:
        pass

    def keep(self, prompt: Prompt) -> bool:
        return True

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        return candidates[:k], None

    def group_weights(self) -> dict[str, float]:
        return {}

    def metrics(self) -> dict[str, Any]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
