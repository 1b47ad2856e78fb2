"""The paper's "Ada-EMA" pass-rate tracker: per prompt, decayed counts of correct and drawn samples.

On each visit with n_t samples of which k_t are correct, N_tot <- decay * N_tot + n_t, N_pos <- decay * N_pos + k_t,
and p_hat = (N_pos + alpha) / (N_tot + alpha + beta) under a Beta(alpha, beta) prior, so p_hat is never 0 or 1. The
paper leaves alpha, beta and decay unstated; our defaults (`MemoryOptions`) are Beta(1, 1) and decay 0.9. The decayed
counts are also MoPPS's posterior (its update alpha <- lambda alpha + (1 - lambda) alpha_0 + k is the same recursion
on the counts).

Beside the pass-rate counts the tracker keeps each prompt's decayed reward mass (the sum of its rewards clipped into
[0, 1], discounted alike): `value` = (mass + alpha) / (N_tot + alpha + beta) estimates the prompt's mean reward, the
quantity a baseline must centre (SPO's tracker; `PromptMemory.value`). With 0/1 rewards the mass is N_pos and the
value is p_hat; with partial credit the pass rate (correct = reward > threshold) and the mean reward differ.
"""

from __future__ import annotations

import math
from typing import Any


class PassRateTracker:
    def __init__(self, *, alpha: float, beta: float, decay: float):
        self.alpha, self.beta, self.decay = alpha, beta, decay
        self.counts: dict[str, tuple[float, float]] = {}
        """prompt id -> (decayed correct count, decayed total count)"""
        self.mass: dict[str, float] = {}
        """prompt id -> decayed sum of its rewards clipped into [0, 1] (absent: equal to the correct count)."""

    def estimate(self, prompt_id: str) -> float:
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        return (n_pos + self.alpha) / (n_tot + self.alpha + self.beta)

    def reward_mass(self, prompt_id: str) -> float:
        return self.mass.get(prompt_id, self.counts.get(prompt_id, (0.0, 0.0))[0])

    def update(
        self, prompt_id: str, correct: int, total: int, decay: float | None = None, mass: float | None = None
    ) -> None:
        """One visit: the counts discounted by `decay` (default the tracker's own), then the visit's added; `mass` is
        the visit's reward mass (default `correct`: 0/1 rewards)."""
        if not 0 <= correct <= total:
            raise ValueError(f"prompt {prompt_id!r}: correct={correct} must be in [0, total={total}]")
        mass = float(correct) if mass is None else float(mass)
        if not 0.0 <= mass <= total:
            raise ValueError(f"prompt {prompt_id!r}: reward mass {mass} must be in [0, total={total}]")
        lam = self.decay if decay is None else decay
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        old_mass = self.reward_mass(prompt_id)
        self.counts[prompt_id] = (lam * n_pos + correct, lam * n_tot + total)
        new_mass = lam * old_mass + mass
        if new_mass == self.counts[prompt_id][0]:
            self.mass.pop(prompt_id, None)  # the same as the correct count: 0/1 rewards keep no second number
        else:
            self.mass[prompt_id] = new_mass

    def state_dict(self) -> dict[str, Any]:
        return {
            "counts": {k: list(v) for k, v in self.counts.items()},
            **({"mass": dict(self.mass)} if self.mass else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        counts = {k: (float(v[0]), float(v[1])) for k, v in state["counts"].items()}
        for k, (pos, tot) in counts.items():  # a damaged or hand-edited state must not steer allocation
            if not (math.isfinite(pos) and math.isfinite(tot) and 0.0 <= pos <= tot):
                raise ValueError(
                    f"pass-rate tracker state for prompt {k!r}: counts ({pos}, {tot}) must be finite "
                    "with 0 <= correct <= total"
                )
        mass = {k: float(v) for k, v in state.get("mass", {}).items()}  # absent before 0.5 and for 0/1 rewards
        for k, m in mass.items():
            if k not in counts or not (math.isfinite(m) and 0.0 <= m <= counts[k][1]):
                raise ValueError(f"pass-rate tracker state for prompt {k!r}: reward mass {m} must be in [0, total]")
        self.counts, self.mass = counts, mass
