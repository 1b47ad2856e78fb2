"""GRESO's pre-rollout skip (arXiv 2506.02177, its `filter_examples_all_probabilistic`), as an admission rule.

A prompt whose last c visits were all correct is kept with probability max(p_easy^c, 0.01), all wrong
max(p_hard^c, 0.01); p_easy and p_hard start at 0.5 and move by 0.01 per step within [0.05, 0.95], down when the last
step's all-correct share of sampled prompts was >= zero_variance_target / 3 (all-wrong share >= 2/3 of it), up
otherwise; they adapt only once a candidate with history has been offered (the paper: from the second epoch on).
Departures: "all correct / all wrong" is the whole visit's pool (the paper thresholds the mean at 0.98 / 0.11, the
same for groups of <= 8 samples); GRESO's adaptive generation batch size (drawing about 1.25x the expected need) is
replaced by asking the source for exactly the deficit. `greso_skip_share` is the rule's long-run law (the planner's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.admission.rule import AdmissionRule, RuleContext
from reinforce_ada.sampling.checks import unit
from reinforce_ada.sampling.fields import FeatureOptions, option
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class GresoOptions(FeatureOptions):
    zero_variance_target: float = option(
        0.25, "target zero-variance share of sampled prompts; the skip probabilities adapt toward it"
    )

    def check(self) -> None:
        unit("zero_variance_target", self.zero_variance_target)


class Greso(AdmissionRule):
    Options = GresoOptions
    METRICS = {
        "skipped_greso": "Offered prompts GRESO skipped (after a zero-variance streak s, kept w.p. max(p^s, 0.01)).",
        "greso_p_easy": "GRESO's keep-probability base p for all-correct streaks (moves 0.01 a step in [0.05, 0.95]).",
        "greso_p_hard": "GRESO's keep-probability base p for all-wrong streaks (moves 0.01 a step in [0.05, 0.95]).",
    }
    LO, HI, STEP, FLOOR = 0.05, 0.95, 0.01, 0.01

    def __init__(self, opts: Any, ctx: RuleContext):
        super().__init__(opts, ctx)
        self.target = opts.zero_variance_target
        self.p_easy = self.p_hard = 0.5
        self.active = False
        self.skipped = 0

    def reset_step(self) -> None:
        self.skipped = 0

    def start_step(self) -> None:
        self.adapt(self.ctx.memory.stats)  # the last step's visits

    def adapt(self, stats: dict[str, int]) -> None:
        if not self.active or stats["visits"] == 0:
            return
        easy, hard = stats["all_correct"] / stats["visits"], stats["all_wrong"] / stats["visits"]
        step_easy = -self.STEP if easy >= self.target / 3 else self.STEP
        step_hard = -self.STEP if hard >= self.target * 2 / 3 else self.STEP
        self.p_easy = float(np.clip(self.p_easy + step_easy, self.LO, self.HI))
        self.p_hard = float(np.clip(self.p_hard + step_hard, self.LO, self.HI))

    def keep(self, prompt: Prompt) -> bool:
        memory = self.ctx.memory
        if prompt.id in memory.visits:
            self.active = True
        streak = memory.streak.get(prompt.id, 0)
        if streak == 0:
            return True
        p = self.p_easy if streak > 0 else self.p_hard
        kept = bool(self.ctx.rng.random() < max(p ** abs(streak), self.FLOOR))
        self.skipped += not kept
        return kept

    def metrics(self) -> dict[str, Any]:
        return {"skipped_greso": self.skipped, "greso_p_easy": self.p_easy, "greso_p_hard": self.p_hard}

    def state_dict(self) -> dict[str, Any]:
        return {"greso": {"p_easy": self.p_easy, "p_hard": self.p_hard, "active": self.active, "skipped": self.skipped}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        g = state["greso"]
        self.p_easy, self.p_hard, self.active = g["p_easy"], g["p_hard"], g["active"]
        self.skipped = g.get("skipped", state.get("counts", {}).get("skipped_greso", 0))  # this step's so far


def greso_skip_share(all_correct: float, all_wrong: float, *, p_easy: float = 0.5, p_hard: float = 0.5) -> float:
    """Long-run share of a prompt's offers that GRESO skips, with fixed exploration probabilities.

    The state is the zero-variance streak s (+c: c all-correct visits in a row, -c: all wrong, 0: the last visit
    had both); an offer keeps the prompt with probability max(p^|s|, 0.01) and a kept visit moves s by the visit's
    outcome. Streaks beyond the floor behave alike, so they are merged.
    """
    depth = 1
    while max(p_easy, p_hard) ** depth > Greso.FLOOR:
        depth += 1
    states = list(range(-depth, depth + 1))
    at = {s: i for i, s in enumerate(states)}

    def keep(s: int) -> float:
        return 1.0 if s == 0 else max((p_easy if s > 0 else p_hard) ** abs(s), Greso.FLOOR)

    mixed = 1.0 - all_correct - all_wrong
    t_SS = np.zeros((len(states), len(states)))
    for s in states:
        kp = keep(s)
        t_SS[at[s], at[s]] += 1 - kp
        t_SS[at[s], at[min(s + 1, depth) if s > 0 else 1]] += kp * all_correct
        t_SS[at[s], at[max(s - 1, -depth) if s < 0 else -1]] += kp * all_wrong
        t_SS[at[s], at[0]] += kp * mixed
    # stationary distribution: pi (T - I) = 0, sum pi = 1
    a = np.vstack([(t_SS - np.eye(len(states))).T, np.ones(len(states))])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(len(states)), 1.0], rcond=None)[0]
    return float(1.0 - sum(pi[at[s]] * keep(s) for s in states))
