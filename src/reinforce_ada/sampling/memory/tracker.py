"""The paper's "Ada-EMA" pass-rate tracker: per prompt, decayed counts of correct and drawn samples.

On each visit with n_t samples of which k_t are correct, N_tot <- decay * N_tot + n_t, N_pos <- decay * N_pos + k_t,
and p_hat = (N_pos + alpha) / (N_tot + alpha + beta) under a Beta(alpha, beta) prior, so p_hat is never 0 or 1. The
paper leaves alpha, beta and decay unstated; our defaults (`MemoryOptions`) are Beta(1, 1) and decay 0.9. The decayed
counts are also MoPPS's posterior (its update alpha <- lambda alpha + (1 - lambda) alpha_0 + k is the same recursion
on the counts).
"""

from __future__ import annotations

import math
from typing import Any


class PassRateTracker:
    def __init__(self, *, alpha: float, beta: float, decay: float):
        self.alpha, self.beta, self.decay = alpha, beta, decay
        self.counts: dict[str, tuple[float, float]] = {}
        """prompt id -> (decayed correct count, decayed total count)"""

    def estimate(self, prompt_id: str) -> float:
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        return (n_pos + self.alpha) / (n_tot + self.alpha + self.beta)

    def update(self, prompt_id: str, correct: int, total: int, decay: float | None = None) -> None:
        """One visit: the counts discounted by `decay` (default the tracker's own), then the visit's added."""
        if not 0 <= correct <= total:
            raise ValueError(f"prompt {prompt_id!r}: correct={correct} must be in [0, total={total}]")
        lam = self.decay if decay is None else decay
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        self.counts[prompt_id] = (lam * n_pos + correct, lam * n_tot + total)

    def state_dict(self) -> dict[str, Any]:
        return {"counts": {k: list(v) for k, v in self.counts.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        counts = {k: (float(v[0]), float(v[1])) for k, v in state["counts"].items()}
        for k, (pos, tot) in counts.items():  # a damaged or hand-edited state must not steer allocation
            if not (math.isfinite(pos) and math.isfinite(tot) and 0.0 <= pos <= tot):
                raise ValueError(
                    f"pass-rate tracker state for prompt {k!r}: counts ({pos}, {tot}) must be finite "
                    "with 0 <= correct <= total"
                )
        self.counts = counts
