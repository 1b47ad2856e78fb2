"""The run's guards: an optimizer step that wrecks the weights is rolled back, counted, and stops the run when it
keeps happening (`StepGuard`); a verifier that fails on most of a step's samples stops the run (`verifier_failing`).

A step is rolled back when it leaves a non-finite weight, when torch refuses it (a step size that overflows
float32), or when it moves the trainable weights by more than `optim.max_update_ratio` times their own norm
(||theta_after - theta_before|| / ||theta_before||). A sane AdamW step moves them by about lr / (weight scale), well
under 1%; `--optim.lr 1e30` or `--optim.weight_decay 1e30` move them by 1e26 or more, finite but ruinous: the
non-finite check alone let such runs finish with weights around 9e28 and accuracy 0.

Rollback restores the pre-step weights (a copy taken before the step) and AdamW's state: on the first step the
state did not exist and is removed again (exact); after that the moments are un-updated from the gradient that is
still in `.grad` (m = (m' - (1 - b1) g) / b1, v = (v' - (1 - b2) g^2) / b2, step - 1), exact up to float rounding.
Keeping a second copy of the moments instead would cost two more copies of the weights in memory every step.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from reinforce_ada.errors import RunStopped


class TrainingDiverged(RunStopped):
    """Too many optimizer steps in a row were rolled back: the learning rate or weight decay is too large."""


class StepGuard:
    def __init__(self, opt: torch.optim.Optimizer, params: list[torch.Tensor], optim_cfg: Any) -> None:
        self.opt, self.params, self.cfg = opt, params, optim_cfg
        self.in_a_row = 0
        self.last_ratio = 0.0

    def step(self) -> bool:
        """`opt.step()`, rolled back if it wrecks the weights; returns whether it was kept. Raises TrainingDiverged
        after `optim.max_rollbacks` rolled-back steps in a row."""
        before = [p.detach().clone() for p in self.params]
        counts = [self._count(p) for p in self.params]
        try:
            self.opt.step()
            bad = self._wrecked(before)
        except RuntimeError as e:  # torch refuses a step size that overflows float32 (lr far too large)
            if "overflow" not in str(e):
                raise
            bad = "the step size overflowed float32"
        if not bad:
            self.in_a_row = 0
            return True
        self._roll_back(before, counts)
        self.in_a_row += 1
        if self.in_a_row >= self.cfg.max_rollbacks:
            o = self.cfg
            decay = f", optim.weight_decay={o.weight_decay:g} (--optim.weight_decay)" if o.weight_decay else ""
            raise TrainingDiverged(
                f"{self.in_a_row} optimizer steps in a row were rolled back ({bad}): optim.lr={o.lr:g} (--optim.lr)"
                f"{decay} is too large for this model. Lower --optim.lr (AdamW fine-tuning uses about 1e-6..1e-3); "
                f"optim.max_update_ratio={o.max_update_ratio:g} bounds how far one step may move the weights"
            )
        return False

    def _wrecked(self, before: list[torch.Tensor]) -> str:
        """Why the step just taken must be undone, or "" when it is fine."""
        if not all(bool(torch.isfinite(p).all()) for p in self.params):
            return "the weights became NaN or inf"
        with torch.no_grad():  # per-tensor norms, then the norm of those: no flat copy of the weights
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(b.float()) for b in before]))
            moved = torch.linalg.vector_norm(
                torch.stack(
                    [
                        torch.linalg.vector_norm((p.detach() - b).float())
                        for p, b in zip(self.params, before, strict=True)
                    ]
                )
            )
        self.last_ratio = float(moved) / float(norm) if float(norm) > 0 else 0.0
        if not math.isfinite(self.last_ratio):
            return "one step moved the weights beyond float32's range"
        if self.last_ratio > self.cfg.max_update_ratio:
            return f"one step moved the weights by {self.last_ratio:.3g} x their norm"
        return ""

    def _count(self, p: torch.Tensor) -> float | None:
        state = self.opt.state.get(p)
        if not state or "step" not in state:
            return None
        return float(state["step"])

    @torch.no_grad()
    def _roll_back(self, before: list[torch.Tensor], counts: list[float | None]) -> None:
        for p, old in zip(self.params, before, strict=True):
            p.copy_(old)
        betas = {id(p): g["betas"] for g in self.opt.param_groups for p in g["params"]}
        for p, count in zip(self.params, counts, strict=True):
            state = self.opt.state.get(p)
            if not state or "step" not in state or (count is not None and float(state["step"]) == count):
                continue  # the optimizer did not reach this parameter
            if count is None:  # the first step created the state: remove it again (exact)
                del self.opt.state[p]
                continue
            b1, b2 = betas[id(p)]
            g = p.grad
            state["exp_avg"].sub_(g, alpha=1 - b1).div_(b1)
            state["exp_avg_sq"].addcmul_(g, g, value=-(1 - b2)).div_(b2).clamp_(min=0)
            state["step"] -= 1


class VerifierFailing(RunStopped):
    """The verifier failed on more than `run.max_verifier_error_share` of a step's samples: the run stops."""


def verifier_failing(m: dict[str, Any], cfg: Any) -> str:
    """Why the run must stop for its verifier, or "": a dead reward (every sample an error, every reward 0) trains
    on nothing and would otherwise exit 0 after days of zero loss."""
    errors, total = m.get("verifier_errors", 0) or 0, m.get("samples_generated", 0) or 0
    limit = cfg.run.max_verifier_error_share
    if not total or errors / total <= limit:
        return ""
    name = cfg.task.verifier or f"the {cfg.task.name} task's verifier"
    return (
        f"the verifier {name} failed on {errors} of {total} samples at step {m.get('step')} "
        f"({errors / total:.0%} > run.max_verifier_error_share={limit:g}); fix the verifier and resume, or raise "
        "--run.max_verifier_error_share (1.0 = never stop)"
    )
