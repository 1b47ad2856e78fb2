"""The sampler/learner mismatch of a step, reported every step so drift is visible (`mismatch_logp_abs_mean`,
`mismatch_logp_abs_max`, `is_affected_token_share`)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from reinforce_ada.models.forward import right_pad
from reinforce_ada.training.losses import importance_weights


class Drift:
    """Sampler/learner mismatch over the tokens of a step: mean and max |learner log-prob - sampler log-prob|, and
    the share of tokens the importance weight truncated or masked (reported every step, so drift is visible)."""

    METRICS: ClassVar[dict[str, str]] = {
        "mismatch_logp_abs_mean": "Mean over the step's fresh tokens of abs(learner log-prob - sampler log-prob), "
        "before the update.",
        "mismatch_logp_abs_max": "The largest of those differences.",
        "is_affected_token_share": "Only with optim.is_correction other than none: share of those tokens whose "
        "importance weight was truncated or masked.",
    }
    """What `metrics()` returns (nothing when no token was measured), each key's definition (docs/metrics.md)."""

    def __init__(self, mode: str = "none", cap: float = 2.0) -> None:
        self.mode, self.cap = mode, cap
        self.total = self.count = 0.0
        self.max = 0.0
        self.affected = 0.0

    def add(self, learner_logp_BT: torch.Tensor, rows: list[Any], mask_BT: torch.Tensor) -> None:
        sampler, _ = right_pad([r.sampler_logp for r in rows], device=learner_logp_BT.device)
        diff = (learner_logp_BT.float() - sampler).abs()[mask_BT.bool()]
        if self.mode != "none":
            _, share = importance_weights(learner_logp_BT.float(), sampler, mask_BT, mode=self.mode, cap=self.cap)
            self.affected += share * len(diff)
        self.total += float(diff.sum())
        self.count += len(diff)
        self.max = max(self.max, float(diff.max()) if len(diff) else 0.0)

    def metrics(self) -> dict[str, float]:
        if not self.count:
            return {}
        out = {"mismatch_logp_abs_mean": self.total / self.count, "mismatch_logp_abs_max": self.max}
        if self.mode != "none":
            out["is_affected_token_share"] = self.affected / self.count
        return out
