"""Conformal stopping: per-prompt budgets on a grid, stopped by a split-conformal test (`trl-cgrpo` 0.2.0, C-GRPO).

The rule, as the package's source states it (`trl_cgrpo/conformal.py`, `cgrpo_trainer.py`, read at 0.2.0):
1) A prompt is sampled up to each budget of `budget_grid` in turn (default 2/4/8/16/32: 2 samples, then 2 more, 4
   more, ...) and stops at the first budget k whose conformal prediction set is a singleton. A prompt that never
   resolves stops at the grid's end, k_max = max(budget_grid), and is trained on like any other.
2) With pass/fail outcomes (the package's verifier scores) the set is {pass} once a correct sample is among the first
   k and the score of those k outcomes is <= qhat_k: `first_success` scores j*/k (j* the 1-based position of the
   first correct sample, 1.0 if none) and `pass_rate` scores 1 - correct/k. "Correct" means reward > `threshold`.
3) Calibration: every calibration prompt is sampled k_max times with the current policy; each gets one score per
   budget k from its first k outcomes. qhat_k is the ceil((n + 1)(1 - delta))-th smallest of the n scores at k (the
   largest when that index passes n; 1.0 when n = 0). With `conformal_delta` unset (the package's default, delta=None)
   delta = (1 - solve rate) + `delta_margin`, clipped to [0.05, 0.95], where the solve rate is the share of
   calibration prompts whose score at k_max is < 1; `split_delta` picks delta on the first half of the calibration
   set (in draw order) and the thresholds on the second. Calibration runs at the first step and every
   `recalibrate_every` steps after (0: once).
4) Trained on: every sample a prompt drew (its k_used real completions; the package pads groups to k_max with masked,
   NaN-reward rows, which contribute nothing), with GRPO's group baseline and std over those real samples.
Departures (where our protocol differs from a TRL trainer subclass):
- Calibration prompts: the package calibrates on a separate, fixed, held-out dataset. A strategy sees only its prompt
  source, so at a calibration step it asks the source (`wanted_prompts`) for `calibration_prompts` fresh prompts
  (default 200, the package README's held-out split; the package's default is its whole calibration dataset), samples
  each k_max times and does not train on them. They come from the training stream, so they are held out for that
  step only and are trained on when offered again later (with the trainer's `PromptOrder` they use up their place in
  the current epoch); with `select=...` the admission stage filters them like any prompt. Their samples are real
  draws: they count in `samples_generated` (the package logs them apart, `cgrpo/calibration_rollouts`, outside its
  savings), and the prompts count in the ledger's `prompts` and as giving no signal. The step's training prompts
  wait until the thresholds are fit, as the package calibrates before generating the batch.
- When the source is exhausted before a calibration prompt arrives (no source, as in `plan`), the calibration set is
  empty: the thresholds stay as they were -- 1.0 before any calibration, the package's value for an empty set, i.e.
  "stop at the first budget with a correct sample" -- and calibration is tried again next step. So
  `reinforce-ada plan --strategy conformal` shows the rule at qhat = 1 (calibration depends on the pass rates of a
  whole population of prompts, not on one prompt's p); `first_success_law` is that law in closed form.
- Steps are the strategy's steps (one `begin` with prompts), the trainer's optimizer steps when each step samples once.
- The package's default score, `aps`, ranks extracted answer strings against a reference answer; the sampling layer
  sees rewards only (simulated engines have no text), so `first_success` (the package's choice for verifier-scored
  tasks) is our default and `aps` is refused with a ConfigError.
- `budget_grid` is '/'-separated (a comma separates arm-spec options); budgets above `max_samples` are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least, boolean, check_group, choice, fits_memory, unit
from reinforce_ada.sampling.options import Options, option
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group, Prompt

CONFORMAL_SCORES = ("first_success", "pass_rate")


def parse_budget_grid(text: str) -> tuple[int, ...]:
    """`"2/4/8/16/32"` -> (2, 4, 8, 16, 32), sorted (as trl-cgrpo sorts its grid); the error names `budget_grid`."""
    hint = "write distinct positive integers separated by '/', e.g. 2/4/8/16/32 (a comma separates arm-spec options)"
    if not isinstance(text, str):
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}")
    try:
        grid = [int(x) for x in text.split("/")]
    except ValueError:
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}") from None
    if any(k < 1 for k in grid) or len(set(grid)) != len(grid):
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}")
    return tuple(sorted(grid))


@dataclass(frozen=True)
class ConformalOptions(Options):
    """C-GRPO's options, in our names (trl-cgrpo 0.2.0's CGRPOConfig defaults); GRPO's group baseline."""

    max_samples: int = option(32, "cap on samples per prompt per step: budgets above it are dropped")
    budget_grid: str = option(
        "2/4/8/16/32",
        "ascending per-prompt budgets, '/'-separated; a prompt stops at the first whose conformal set is a singleton "
        "(trl-cgrpo 0.2.0 budget_grid, default 2,4,8,16,32; budgets above max_samples are dropped)",
    )
    conformal_score: str = option(
        "first_success",
        "nonconformity score on pass/fail outcomes: first_success (j*/k, position of the first correct sample) or "
        "pass_rate (1 - correct/k), trl-cgrpo's verifier scores (its answer-string 'aps' needs extracted answers, "
        "which the sampling layer never sees)",
    )
    conformal_delta: float | None = option(
        None,
        "miscoverage level delta in (0, 1); default (trl-cgrpo's delta=None): at each calibration, (1 - solve rate "
        "within the largest budget) + delta_margin, clipped to [0.05, 0.95]",
    )
    delta_margin: float = option(0.05, "margin added to the miss rate when conformal_delta is unset (trl-cgrpo 0.05)")
    split_delta: bool = option(
        False, "choose delta on the first half of the calibration set, thresholds on the second (trl-cgrpo)"
    )
    recalibrate_every: int = option(
        50, "refit the thresholds every this many steps (trl-cgrpo 50); 0 calibrates once, at the first step"
    )
    calibration_prompts: int = option(
        200,
        "prompts per calibration, drawn from the prompt source, sampled max(budget_grid) times each and not trained "
        "on (trl-cgrpo: its whole held-out calibration set; its README example holds 200)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_group(self.n, self.max_samples)
        parse_budget_grid(self.budget_grid)
        if self.conformal_score == "aps":
            raise ConfigError(
                "conformal_score='aps' is not available: trl-cgrpo's APS score ranks extracted answer strings against "
                f"a reference answer, and a strategy sees rewards only; choose one of {list(CONFORMAL_SCORES)}"
            )
        choice("conformal_score", self.conformal_score, CONFORMAL_SCORES)
        if self.conformal_delta is not None:
            unit("conformal_delta", self.conformal_delta, open_lo=True, open_hi=True)
        unit("delta_margin", self.delta_margin, open_hi=True)
        boolean("split_delta", self.split_delta)
        at_least("recalibrate_every", self.recalibrate_every, 0)
        at_least("calibration_prompts", self.calibration_prompts, 0)
        fits_memory("calibration_prompts", self.calibration_prompts, 1024, "calibration prompts held")


DELTA_CLIP = (0.05, 0.95)
"""trl-cgrpo's `select_delta_auto` bounds on the automatic delta."""


def conformal_quantile(scores: Sequence[float], delta: float) -> float:
    """Split-conformal quantile: the ceil((n + 1)(1 - delta))-th smallest score, the largest if that overruns n,
    1.0 for no scores.

    >>> conformal_quantile([0.1, 0.2, 0.3, 0.4], 0.5)  # ceil(5 * 0.5) = 3rd smallest
    0.3
    """
    s = sorted(float(x) for x in scores)
    if not s:
        return 1.0
    index = math.ceil((len(s) + 1) * (1.0 - delta))
    return s[min(max(index, 1), len(s)) - 1]


def first_success_score(passes: Sequence[bool], k: int) -> float:
    """j*/k for the first correct sample among the first k (1-based j*), 1.0 when there is none."""
    for j, ok in enumerate(passes[:k], start=1):
        if ok:
            return j / k
    return 1.0


def pass_rate_score(passes: Sequence[bool], k: int) -> float:
    """1 - (correct among the first k) / k."""
    return 1.0 - sum(bool(x) for x in passes[:k]) / k


SCORES = {"first_success": first_success_score, "pass_rate": pass_rate_score}


def auto_delta(scores_at_kmax: Sequence[float], margin: float) -> tuple[float, float]:
    """(delta, solve rate): delta = 1 - solve rate + margin, clipped to DELTA_CLIP; solved = score < 1 at k_max."""
    s = np.asarray(list(scores_at_kmax), dtype=float)
    solve = float((s < 1.0 - 1e-9).mean()) if s.size else 0.0
    return float(np.clip(1.0 - solve + margin, *DELTA_CLIP)), solve


def resolves(passes: Sequence[bool], k: int, qhat: float, score: str) -> bool:
    """The conformal set after k outcomes is the singleton {pass}: a correct sample among them, score <= qhat."""
    return any(passes[:k]) and SCORES[score](passes, k) <= qhat


def first_success_law(p: float, grid: Sequence[int], qhat: Sequence[float]) -> tuple[float, float, float]:
    """(zero_signal, expected_samples, unresolved) of one training prompt at pass rate p under `first_success` with
    fixed thresholds (what `plan`'s Monte Carlo estimates). The first correct sample at position j stops the prompt at
    the first budget k >= j with j/k <= qhat_k, else at k_max unresolved; a group is uniform only if j = 1 and the
    other k - 1 samples are correct too, or if no sample is correct."""
    k_max = grid[-1]
    none = (1.0 - p) ** k_max
    zero, expected, unresolved = none, none * k_max, none
    for j in range(1, k_max + 1):
        pj = (1.0 - p) ** (j - 1) * p
        stop = next((k for k, q in zip(grid, qhat, strict=True) if j <= k and j / k <= q), None)
        expected += pj * (stop or k_max)
        unresolved += pj if stop is None else 0.0
        zero += pj * p ** ((stop or k_max) - 1) if j == 1 else 0.0
    return zero, expected, unresolved


def effective_grid(opts: ConformalOptions) -> tuple[int, ...]:
    """The budgets in force: `budget_grid` cut at `max_samples`."""
    return tuple(k for k in parse_budget_grid(opts.budget_grid) if k <= opts.max_samples)


class Conformal(PoolStrategy):
    traits = Traits(streams=False, planner="monte_carlo")
    Options = ConformalOptions
    opts: ConformalOptions
    METRICS = {
        "calibrated": "Whether this step fit new thresholds on a non-empty calibration set.",
        "calibration_prompts_drawn": "Calibration prompts this step drew (sampled k_max times each, not trained).",
        "calibration_samples": "Samples the calibration prompts drew this step.",
        "calibration_size": "Prompts in the calibration behind the current thresholds.",
        "conformal_delta": "The miscoverage delta of the current thresholds (nan before any calibration).",
        "calibration_solve_rate": "Share of calibration prompts solved within k_max, which set delta (nan when fixed).",
        "mean_budget": "Mean samples a training prompt drew (its stopping budget).",
        "rollout_savings": "1 - samples drawn by training prompts / (training prompts x k_max).",
        "qhat_{k}": "The conformal threshold at budget k of budget_grid (1.0 before any calibration).",
        "prompts_at_budget_{k}": "Training prompts that stopped at budget k of budget_grid.",
    }

    @classmethod
    def validate(cls, opts: ConformalOptions) -> None:
        if not effective_grid(opts):
            raise ConfigError(
                f"budget_grid={opts.budget_grid!r} has no budget <= max_samples={opts.max_samples}; lower a budget or "
                "raise max_samples"
            )

    @classmethod
    def cost_hint(cls, opts: ConformalOptions) -> float:
        return float(effective_grid(opts)[-1])

    def __init__(self, cfg: Any):
        self.grid = effective_grid(cfg.options)
        super().__init__(cfg)
        # across steps (checkpointed): the step counter and the thresholds with the calibration they came from
        self.steps = 0
        self.last_calibration: int | None = None
        self.qhat: list[float] = [1.0] * len(self.grid)
        self.delta: float | None = None
        self.solve_rate: float | None = None
        self.cal_scores: list[list[float]] = []

    def _reset(self) -> None:
        super()._reset()
        self.calibrating = False
        """This step calibrates: the training prompts wait until `fitted`."""
        self.fitted = False
        self.calibration: dict[str, list[float]] = {}
        """This step's calibration prompts (draw order) -> their scores per budget, once sampled."""

    def _due(self) -> bool:
        if self.last_calibration is None:
            return True
        every = self.opts.recalibrate_every
        return every > 0 and self.steps - self.last_calibration >= every

    def begin(self, prompts: Sequence[Prompt], **opts: Any) -> None:
        due = bool(prompts) and self._due()
        super().begin(prompts, **opts)
        self.calibrating = due
        if prompts:
            self.steps += 1
        self._maybe_fit()

    def add_prompts(self, prompts: Sequence[Prompt]) -> None:
        super().add_prompts(prompts)
        self._maybe_fit()

    def on_add(self, ids: list[str]) -> None:
        if self.waves > 0:  # only calibration asks for prompts beyond the step's own
            self.calibration.update({pid: [] for pid in ids})

    def wanted_prompts(self) -> int:
        if not self.calibrating or self.fitted or self.exhausted:
            return 0
        return max(0, self.opts.calibration_prompts - len(self.calibration))

    def _maybe_fit(self) -> None:
        """Fit the thresholds once every calibration prompt is drawn and sampled; then release the training prompts."""
        if not self.calibrating or self.fitted or self.wanted_prompts() > 0:
            return
        if any(not scores for scores in self.calibration.values()):
            return
        self.fitted = True
        rows = list(self.calibration.values())
        if rows:
            self._fit(rows)
            self.last_calibration = self.steps - 1
        for pid in self.prompts:
            if pid not in self.calibration and pid in self.live:
                self.dirty[pid] = None

    def _fit(self, rows: list[list[float]]) -> None:
        c = self.opts
        delta_rows = quantile_rows = rows
        if c.conformal_delta is None and c.split_delta:
            delta_rows, quantile_rows = rows[: len(rows) // 2], rows[len(rows) // 2 :]
        if c.conformal_delta is None:
            self.delta, self.solve_rate = auto_delta([r[-1] for r in delta_rows], c.delta_margin)
        else:
            self.delta, self.solve_rate = c.conformal_delta, None
        self.qhat = [conformal_quantile([r[i] for r in quantile_rows], self.delta) for i in range(len(self.grid))]
        self.cal_scores = [list(r) for r in rows]

    def _passes(self, pid: str) -> list[bool]:
        return [float(s.reward) > self.opts.threshold for s in self.pools[pid]]  # type: ignore[arg-type]

    def batch_end(self, pid: str) -> int:
        drawn = len(self.pools[pid])
        if pid in self.calibration:
            return self.grid[-1]
        if self.calibrating and not self.fitted:
            return drawn  # nothing to submit until the thresholds are fit
        return next((k for k in self.grid if k > drawn), self.grid[-1])

    def on_batch(self, pid: str) -> bool:
        passes, k = self._passes(pid), len(self.pools[pid])
        if pid in self.calibration:
            score = SCORES[self.opts.conformal_score]
            self.calibration[pid] = [score(passes, b) for b in self.grid]
            self._maybe_fit()
            return True
        return self.resolved(pid) or k >= self.grid[-1]

    def resolved(self, pid: str) -> bool:
        k = len(self.pools[pid])
        if k not in self.grid:
            return False
        return resolves(self._passes(pid), k, self.qhat[self.grid.index(k)], self.opts.conformal_score)

    def training_ids(self) -> list[str]:
        return [pid for pid in self.prompts if pid not in self.calibration and self.pools[pid]]

    def build(self) -> list[Group]:
        groups = []
        for pid in self.training_ids():  # every drawn sample is trained on (the package masks only its padding)
            pool = self.pools[pid]
            rewards = [float(s.reward) for s in pool]  # type: ignore[arg-type]
            groups.append(Group(self.prompts[pid], list(pool), rewards, resolved=self.resolved(pid)))
        return groups

    def metrics(self) -> dict[str, Any]:
        used = [len(self.pools[pid]) for pid in self.training_ids()]
        k_max, nan = self.grid[-1], float("nan")
        out: dict[str, Any] = {
            **super().metrics(),
            "unresolved_prompts": sum(not self.resolved(pid) for pid in self.training_ids()),
            "calibrated": bool(self.calibrating and self.fitted and self.calibration),
            "calibration_prompts_drawn": len(self.calibration),
            "calibration_samples": sum(len(self.pools[pid]) for pid in self.calibration),
            "calibration_size": len(self.cal_scores),
            "conformal_delta": nan if self.delta is None else self.delta,
            "calibration_solve_rate": nan if self.solve_rate is None else self.solve_rate,
            "mean_budget": float(np.mean(used)) if used else nan,
            "rollout_savings": 1.0 - sum(used) / (len(used) * k_max) if used else nan,
        }
        out.update({f"qhat_{k}": q for k, q in zip(self.grid, self.qhat, strict=True)})
        out.update({f"prompts_at_budget_{k}": used.count(k) for k in self.grid})
        return out

    def _extra_state(self) -> dict[str, Any]:
        return {
            "calibrating": self.calibrating,
            "fitted": self.fitted,
            "calibration": {pid: list(s) for pid, s in self.calibration.items()},
            "steps": self.steps,
            "last_calibration": self.last_calibration,
            "qhat": list(self.qhat),
            "delta": self.delta,
            "solve_rate": self.solve_rate,
            "cal_scores": [list(r) for r in self.cal_scores],
        }

    def _load_extra_state(self, extra: dict[str, Any]) -> None:
        if len(extra["qhat"]) != len(self.grid):
            raise ConfigError(
                f"checkpoint has {len(extra['qhat'])} conformal thresholds but budget_grid={self.opts.budget_grid!r} "
                f"with max_samples={self.opts.max_samples} has {len(self.grid)} budgets; resume with the same grid"
            )
        self.calibrating, self.fitted = bool(extra["calibrating"]), bool(extra["fitted"])
        self.calibration = {pid: [float(x) for x in s] for pid, s in extra["calibration"].items()}
        self.steps, self.last_calibration = int(extra["steps"]), extra["last_calibration"]
        self.qhat = [float(x) for x in extra["qhat"]]
        self.delta, self.solve_rate = extra["delta"], extra["solve_rate"]
        self.cal_scores = [[float(x) for x in r] for r in extra["cal_scores"]]
