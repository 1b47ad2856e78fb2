"""`select=iw` (ours, `sampling.iw`) as an admission rule: MoPPS's candidates and posterior; k of them drawn at random
with inclusion probability from sqrt(E[P(signal)]) under the sampler's law (a defensive mixture, `iw_mix`).

Each admitted prompt's `Group.weight` is multiplied by its Horvitz-Thompson weight (clipped at `iw_clip`,
self-normalised to mean 1 over the step's admitted prompts), so the weighted batch estimates the uniform batch's
gradient; `iw_weight_max` and `iw_ess` in `metrics()`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reinforce_ada.sampling.admission.rule import AdmissionRule, RuleContext
from reinforce_ada.sampling.iw import iw_choose, self_normalise, weight_metrics
from reinforce_ada.types import Prompt


class ImportanceWeighted(AdmissionRule):
    ranks = True

    def __init__(self, opts: Any, ctx: RuleContext):
        super().__init__(opts, ctx)
        self.table = ctx.law()
        self.raw: dict[str, float] = {}
        """Each prompt admitted this step -> its clipped Horvitz-Thompson weight (not yet normalised)."""

    def reset_step(self) -> None:
        self.raw = {}

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        chosen, w = iw_choose(candidates, k, self.ctx.memory, self.ctx.rng, self.table, self.opts)
        self.raw.update((p.id, x) for p, x in zip(chosen, w, strict=True))
        return chosen, w

    def group_weights(self) -> dict[str, float]:
        """The step's admitted prompts' weights divided by their mean (`sampling.iw`, 4)."""
        ids = list(self.raw)
        return dict(zip(ids, self_normalise(np.array([self.raw[i] for i in ids])).tolist(), strict=True))

    def metrics(self) -> dict[str, Any]:
        return weight_metrics(np.array(list(self.group_weights().values())))

    def state_dict(self) -> dict[str, Any]:
        return {"iw_raw": dict(self.raw)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.raw = dict(state.get("iw_raw", {}))  # absent before select=iw
