"""SPO's prioritised prompt draw (arXiv 2509.13232 §4.3; the recipe's `spo_ray_trainer.py`) as an admission rule.

From `candidates` x k candidates, draw k without replacement with probability proportional to
sqrt(v_hat (1 - v_hat)) + `priority_eps` (paper and recipe 0.05), v_hat the prompt memory's estimate (`estimator`;
an unvisited prompt's is its prior's mean). Prompts near a pass rate of 1/2 teach the most; the floor keeps every
prompt drawable.
Departures: the recipe draws from the whole training set every step and gives a prompt without an offline value
weight 0; here the candidates are the `candidates` x k prompts the source offers (epoch order; an unselected one waits
for its next offer) and a prompt without a visit has its prior's weight. The camera-ready's N_eff^gamma term is not in
the recipe (gamma = 0) and not here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.rule import AdmissionRule, RankingOptions
from reinforce_ada.sampling.fields import option
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class PriorityOptions(RankingOptions):
    priority_eps: float = option(0.05, "the floor eps of the weight sqrt(v_hat (1 - v_hat)) + eps (paper 0.05)")

    def check(self) -> None:
        super().check()
        if not 0.0 < self.priority_eps < float("inf"):
            raise ConfigError(
                f"priority_eps={self.priority_eps} is out of range; it must be > 0 (every prompt drawable)"
            )


def priority_weights(v_hat: np.ndarray, eps: float) -> np.ndarray:
    """sqrt(v (1 - v)) + eps, v clipped into [0, 1].

    >>> priority_weights(np.array([0.0, 0.5, 1.0]), 0.05).tolist()
    [0.05, 0.55, 0.05]
    """
    v = np.clip(np.asarray(v_hat, dtype=float), 0.0, 1.0)
    return np.sqrt(v * (1.0 - v)) + eps


class Priority(AdmissionRule):
    ranks = True
    Options = PriorityOptions

    def choose(self, candidates: list[Prompt], k: int) -> tuple[list[Prompt], list[float] | None]:
        if len(candidates) <= k:
            return list(candidates), None
        memory = self.ctx.memory
        memory.prefetch(candidates)  # an oracle's rates: one batched call
        w = priority_weights(np.array([memory.estimate(p) for p in candidates]), self.opts.priority_eps)
        picked = self.ctx.rng.choice(len(candidates), size=k, replace=False, p=w / w.sum())
        return [candidates[i] for i in sorted(picked)], None
