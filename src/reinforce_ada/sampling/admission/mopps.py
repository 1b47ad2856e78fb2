"""MoPPS (arXiv 2507.04632, its `PosteriorSampler.sample_batch` "topk") as an admission rule.

Draw theta ~ Beta(a, b) from each candidate's memory posterior (`estimator`; the tracker's decayed counts are MoPPS's
posterior, its default decay is 1, ours 0.9 unless `decay=1`) and keep the k with theta nearest `target` (paper 0.5),
from `candidates` x k candidates (paper 16). With `estimator=oracle` theta is the exact rate (to ~1e-3): with n
fixed, the rate nearest 0.5 maximises P(signal) = 1 - p^n - (1 - p)^n, so `uniform:select=mopps,estimator=oracle`
is oracle selection. Unselected candidates wait for the source to offer them again (with our epoch-ordered
`PromptOrder`, the next epoch; MoPPS's loader reshuffles each epoch too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reinforce_ada.sampling.admission.rule import AdmissionRule, RankingOptions
from reinforce_ada.sampling.checks import unit
from reinforce_ada.sampling.fields import option
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class MoppsOptions(RankingOptions):
    target: float = option(
        0.5, "target pass rate; the prompts whose sampled posterior lies nearest are chosen", plan=False
    )

    def check(self) -> None:
        super().check()
        unit("target", self.target)


def mopps_choose(
    candidates: list[Prompt], k: int, memory: PromptMemory, rng: np.random.Generator, target: float
) -> list[Prompt]:
    """MoPPS "topk": Thompson-sample each candidate's pass rate, keep the k nearest `target` (candidate order)."""
    if len(candidates) <= k:
        return list(candidates)
    memory.prefetch(candidates)  # an oracle's rates: one batched call
    ab = np.array([memory.posterior(p) for p in candidates])
    theta = rng.beta(ab[:, 0], ab[:, 1])
    best = np.lexsort((np.arange(len(candidates)), (theta - target) ** 2))[:k]
    return [candidates[i] for i in sorted(best)]


class Mopps(AdmissionRule):
    ranks = True
    Options = MoppsOptions

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        return mopps_choose(candidates, k, self.ctx.memory, self.ctx.rng, self.opts.target), None
