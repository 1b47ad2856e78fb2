"""SPO's KL-adaptive forgetting (arXiv 2509.13232 §4.1; the recipe's `_get_spo_rho`): how fast a prompt's tracker
forgets depends on how far the policy moved since the prompt's last visit.

With `forgetting = "drift"`, a visit discounts the prompt's counts by rho = clip(2^(-D / drift_half), rho_min, rho_max)
instead of the fixed `decay`: D is the token-mean |log pi_then(y) - log pi_now(y)| of the response y drawn at the
prompt's previous visit, pi_then its log-probs as the sampler returned them then, pi_now its log-probs under the policy
drawing this visit (a `Scorer` the caller attaches: the trainer scores with the learner, the simulator with its
logits). A prompt without a previous response, or with an empty one, has D = 0 and rho = rho_max (the recipe's
first visit). Defaults are the recipe's constants: drift_half 0.06 (hard-coded there, absent from the paper),
[rho_min, rho_max] = [0.875, 0.96].
Departures from the recipe: D is measured when the prompt joins the step, between the policy that drew its last
response and the one about to draw this one; the recipe measures it after the step's update, between the policies
right after the two updates (both spans are the policy's movement between the two visits, shifted by one update), and
scores with one extra forward pass (the stored sampler log-probs replace its second). The first sample of a visit's
pool is the response kept (the recipe has n = 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import positive
from reinforce_ada.sampling.fields import FeatureOptions, option
from reinforce_ada.types import Prompt

Scorer = Callable[[Sequence[Prompt], Sequence[Sequence[int]]], list[Sequence[float]]]
"""(prompts, completion token ids) -> each completion's per-token log-probs under the current policy."""


@dataclass(frozen=True)
class DriftOptions(FeatureOptions):
    """The drift discount's options: they exist while `forgetting = "drift"` (module docstring)."""

    drift_half: float = option(
        0.06, "forgetting=drift: the drift D at which old evidence counts half (recipe 0.06)", plan=False
    )
    rho_min: float = option(0.875, "forgetting=drift: the smallest discount per visit (recipe 0.875)", plan=False)
    rho_max: float = option(0.96, "forgetting=drift: the largest discount per visit (recipe 0.96)", plan=False)

    def check(self) -> None:
        positive("drift_half", self.drift_half)
        if not 0.0 < self.rho_min <= self.rho_max <= 1.0:
            raise ConfigError(f"rho_min={self.rho_min}, rho_max={self.rho_max}: need 0 < rho_min <= rho_max <= 1")


def rho_of(d: float, half: float, lo: float, hi: float) -> float:
    """clip(2^(-d / half), lo, hi).

    >>> rho_of(0.0, 0.06, 0.875, 0.96), rho_of(0.06, 0.06, 0.875, 0.96), round(rho_of(0.006, 0.06, 0.875, 0.96), 4)
    (0.96, 0.875, 0.9330)
    """
    return float(np.clip(2.0 ** (-d / half), lo, hi))


class DriftForgetting:
    """The per-prompt forgetting factors of the module docstring, the last response of every visited prompt, and the
    step's drift statistics."""

    METRICS: ClassVar[dict[str, str]] = {
        "drift_mean": "Mean over the step's prompts with a last response of its drift D, the token-mean absolute "
        "change of its log-probs since it was drawn (nan if none).",
        "rho_mean": "Mean of their forgetting factors rho = clip(2^(-D / drift_half), rho_min, rho_max) (nan if none).",
        "rho_clipped_share": "Share of those factors at rho_min or rho_max (recipe: spo/rho_clip_ratio; nan if none).",
    }
    """What `metrics()` returns, each key's definition (docs/metrics.md)."""

    def __init__(
        self,
        half: float = DriftOptions.drift_half,
        lo: float = DriftOptions.rho_min,
        hi: float = DriftOptions.rho_max,
    ):
        self.half, self.lo, self.hi = half, lo, hi
        self.scorer: Scorer | None = None
        self.last: dict[str, tuple[list[int], list[float]]] = {}
        """prompt id -> (token ids, sampler log-probs) of the first sample of its latest visit."""
        self.pending: dict[str, float] = {}
        """prompt id -> rho for its visit of this step (computed when it joined the step)."""
        self.drifts: list[float] = []
        """This step's measured D values."""

    @classmethod
    def from_options(cls, opts: Any) -> DriftForgetting:
        return cls(opts.drift_half, opts.rho_min, opts.rho_max)

    def prepare(self, prompts: Sequence[Prompt]) -> None:
        """The prompts joined the step: each one's rho, scored in one batched call for those with a last response."""
        known = [p for p in prompts if self.last.get(p.id, ([], []))[0]]
        self.pending.update((p.id, self.hi) for p in prompts)
        if not known:
            return
        if self.scorer is None:
            raise ConfigError(
                "forgetting='drift' needs the policy's log-probs of earlier responses, which reinforce-ada's trainer "
                "and the simulator provide; this caller attached no scorer (use forgetting='fixed')"
            )
        now = self.scorer(known, [self.last[p.id][0] for p in known])
        for p, logp in zip(known, now, strict=True):
            then = np.asarray(self.last[p.id][1], dtype=float)
            d = float(np.mean(np.abs(then - np.asarray(logp, dtype=float)[: len(then)])))
            self.drifts.append(d)
            self.pending[p.id] = rho_of(d, self.half, self.lo, self.hi)

    def rho(self, prompt_id: str) -> float:
        """The visit's forgetting factor (rho_max for a prompt that joined before a scorer could see it)."""
        return self.pending.pop(prompt_id, self.hi)

    def remember(self, prompt_id: str, token_ids: Sequence[int], logprobs: Sequence[float]) -> None:
        if len(token_ids) and len(logprobs) == len(token_ids):
            self.last[prompt_id] = ([int(t) for t in token_ids], [float(x) for x in logprobs])

    def metrics(self) -> dict[str, float]:
        """This step's `drift_mean` (over the prompts with a last response), `rho_mean` and the share of factors at a
        clip (the recipe's `spo/rho_clip_ratio`); nan without a measured prompt."""
        d = np.asarray(self.drifts, dtype=float)
        r = np.array([rho_of(x, self.half, self.lo, self.hi) for x in d])
        nan = float("nan")
        return {
            "drift_mean": float(d.mean()) if len(d) else nan,
            "rho_mean": float(r.mean()) if len(r) else nan,
            "rho_clipped_share": float(np.mean((r <= self.lo) | (r >= self.hi))) if len(r) else nan,
        }

    def new_step(self) -> None:
        self.drifts = []

    def state_dict(self) -> dict[str, Any]:
        last = {k: [list(t), list(lp)] for k, (t, lp) in self.last.items()}
        return {"last": last, "pending": dict(self.pending), "drifts": list(self.drifts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last = {k: ([int(x) for x in t], [float(x) for x in lp]) for k, (t, lp) in state["last"].items()}
        self.pending = {k: float(v) for k, v in state["pending"].items()}
        self.drifts = [float(x) for x in state["drifts"]]


def refuse_drift(forgetting: str, where: str, option: str = "forgetting") -> None:
    """An integration that cannot score earlier responses refuses `forgetting=drift` at start, naming its option."""
    if forgetting == "drift":
        raise ConfigError(
            f"{option}='drift' is not supported by {where}: measuring the policy's drift on a prompt's last response "
            "needs reinforce_ada's own trainer (`reinforce-ada train` / `compare`) or the simulator; choose "
            f"{option}=fixed (a constant discount, `decay`)"
        )
