"""Per-prompt pass-rate tracker for Ada-Est (the paper's "Ada-EMA").

On each visit with n_t samples of which k_t are correct: N_tot <- decay * N_tot + n_t, N_pos <- decay * N_pos + k_t,
and p_hat = (N_pos + alpha) / (N_tot + alpha + beta) under a Beta(alpha, beta) prior, so p_hat is never 0 or 1.
The paper leaves alpha, beta and decay unstated; our defaults are Beta(1, 1) and decay 0.9.
A learned difficulty predictor (any callable prompt -> p_hat) can replace the tracker's estimate (`Est(predictor=)`).
"""

from __future__ import annotations

from typing import Any


class PassRateTracker:
    def __init__(self, *, alpha: float = 1.0, beta: float = 1.0, decay: float = 0.9):
        self.alpha, self.beta, self.decay = alpha, beta, decay
        self.counts: dict[str, tuple[float, float]] = {}
        """prompt id -> (decayed correct count, decayed total count)"""

    def estimate(self, prompt_id: str) -> float:
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        return (n_pos + self.alpha) / (n_tot + self.alpha + self.beta)

    def update(self, prompt_id: str, correct: int, total: int) -> None:
        if not 0 <= correct <= total:
            raise ValueError(f"prompt {prompt_id!r}: correct={correct} must be in [0, total={total}]")
        n_pos, n_tot = self.counts.get(prompt_id, (0.0, 0.0))
        self.counts[prompt_id] = (self.decay * n_pos + correct, self.decay * n_tot + total)

    def state_dict(self) -> dict[str, Any]:
        return {"counts": {k: list(v) for k, v in self.counts.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {k: (float(v[0]), float(v[1])) for k, v in state["counts"].items()}
