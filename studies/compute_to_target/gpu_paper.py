"""The GPU cost model against the paper's measured step times (V3 Table 3): what `bench.costmodel.GpuCost`'s
defaults are fitted to, and how well the model holds where nothing was fitted.

1) The paper's step (Reinforce-Ada V3 section 4, Table 3): Qwen2.5-Math-1.5B on 8 x H100, 512 prompts a step,
   completions up to 2048 tokens. GRPO draws n = 4 a prompt; Seq draws rounds of M = 8 up to 32 a prompt (pos:
   until one correct; balance: until 2 correct and 2 wrong) and trains n = 4 of them; Est draws a budget of 8 a
   prompt in one round and trains them all.
2) Rows per round come from the library's exact planner (`simulation.plan.plan`) over the training pool's pass
   rates: the paper keeps prompts whose base model solves 1-6 of 16 samples (rate <= 0.375), so p = c/16 with
   c = 1..6 equally likely. Seq's round r decodes 8 x 512 x P(still active at round r), read off the planner's
   expected samples with the cap at r rounds. This pool leaves 42 of 512 prompts unresolved after Seq-balance's
   four rounds and draws 3,484 extra samples a step (Seq-pos: 1,425), inside the paper's Fig. 5 ranges (25-55 and
   1,000-6,000), which nothing was fitted to. Departure: it is the start of training; the paper's step times are
   averages over runs whose pass rates move (Seq-balance's extra samples rise late in training, Fig. 5).
3) The fit: the step is linear in `decode_step_s`, `row_token_s` and `step_s`, which solve GRPO (102 s), Est (128 s)
   and Seq-pos (228 s) exactly, with the learner set by the paper's 15 s actor update and the rest assumed
   (`GpuCost`'s field docstrings say which). Three times fit three constants; Seq-balance (290 s) is the check.
4) The 7B row (8 x A100; the update is 85 s of GRPO's 236 s) by transfer, nothing refitted: the 1.5B's rollout
   seconds scaled by one factor so that GRPO takes 236 s, the learner by 85/15, the same rows per round (the paper
   gives no 7B sampling dynamics). It does not hold for Seq (`TABLE3_7B`); stated, not tuned away.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reinforce_ada.bench.costmodel import GpuCost, gpu_step_seconds, mean_length

PROMPTS = 512
"""Prompts a step in the paper."""
RATES = tuple((1 + i % 6) / 16 for i in range(PROMPTS))
"""The training pool's pass rates: c/16 for c = 1..6, as evenly as 512 prompts allow (the paper's filter: base
rate <= 0.375 and at least one correct)."""
TABLE3 = {"grpo": 102.0, "seq-pos": 228.0, "seq-bal": 290.0, "est": 128.0}
"""Seconds a step, Qwen2.5-Math-1.5B on 8 x H100 (V3 Table 3)."""
UPDATE = 15.0
"""Seconds of GRPO's 1.5B step spent in the actor update (paper section 3.4)."""
TABLE3_7B = {"grpo": 236.0, "seq-pos": 333.0, "seq-bal": 375.0, "est": 382.0}
"""Seconds a step, Qwen2.5-Math-7B on 8 x A100 (V3 Table 3)."""
UPDATE_7B = 85.0
"""Seconds of GRPO's 7B step spent in the actor update."""
FITTED = ("grpo", "est", "seq-pos")
"""The arms whose step times the three fitted constants solve; the others are checks."""


def paper_steps(rates: tuple[float, ...] = RATES) -> dict[str, tuple[list[float], float]]:
    """Per arm, (rows per round, samples trained) of the paper's step over `rates`, from the planner."""
    from reinforce_ada.sampling.configure import strategy_config
    from reinforce_ada.simulation.plan import plan

    def expected(cfg: Any) -> float:
        return float(sum(r.expected_samples for r in plan(cfg, rates)))

    out: dict[str, tuple[list[float], float]] = {}
    out["grpo"] = ([expected(strategy_config("uniform", n=4))], 4.0 * len(rates))
    est = expected(strategy_config("est", budget=8 * len(rates)))
    out["est"] = ([est], est)
    for arm, exit in (("seq-pos", "positive"), ("seq-bal", "balanced")):
        drawn = [expected(strategy_config("seq", exit=exit, max_samples=8 * r)) for r in range(1, 5)]
        out[arm] = (list(np.diff([0.0, *drawn])), 4.0 * len(rates))  # round r's rows: what the r-th round adds
    return out


def step_times(cost: GpuCost, steps: dict[str, tuple[list[float], float]] | None = None) -> dict[str, float]:
    """Seconds of each arm's paper step under `cost`."""
    steps = steps or paper_steps()
    return {arm: float(gpu_step_seconds([rows], [trained], cost)[0]) for arm, (rows, trained) in steps.items()}


def fit(
    base: GpuCost | None = None,
    steps: dict[str, tuple[list[float], float]] | None = None,
    free: tuple[str, ...] = ("decode_step_s", "row_token_s", "step_s"),
    fitted: tuple[str, ...] = FITTED,
) -> GpuCost:
    """`base` with the `free` constants solving the `fitted` arms' Table 3 times (as many as constants) and the
    learner set by the paper's update (module docstring, 3); the other constants stay `base`'s."""
    if len(free) != len(fitted):
        raise ValueError(f"{len(free)} free constants {free} need as many fitted arms, got {fitted}")
    base = base or GpuCost()
    steps = steps or paper_steps()
    learner = UPDATE / (steps["grpo"][1] * mean_length(base))
    rest_cost = dataclasses.replace(base, learner_token_s=learner, **dict.fromkeys(free, 0.0))
    bare = dataclasses.replace(rest_cost, decode_step_s=0.0, row_token_s=0.0, step_s=0.0, learner_token_s=0.0)
    bare = dataclasses.replace(bare, prefill_s=0.0, round_s=0.0)
    rest = step_times(rest_cost, steps)
    per_unit = {k: step_times(dataclasses.replace(bare, **{k: 1.0}), steps) for k in free}
    a = np.array([[per_unit[k][arm] for k in free] for arm in fitted])
    b = np.array([TABLE3[arm] - rest[arm] for arm in fitted])
    solved = dict(zip(free, np.linalg.solve(a, b).tolist(), strict=True))
    if min(solved.values()) < 0:
        raise ValueError(f"the fit gives a negative constant {solved} for {base}")
    return dataclasses.replace(rest_cost, **solved)


def transfer_7b(cost: GpuCost, steps: dict[str, tuple[list[float], float]] | None = None) -> GpuCost:
    """The 1.5B constants carried to the 7B row (module docstring, 4): rollout and per-step seconds scaled by one
    factor so that GRPO's step takes 236 s with its 85 s update."""
    steps = steps or paper_steps()
    learner = cost.learner_token_s * UPDATE_7B / UPDATE
    update = learner * steps["grpo"][1] * mean_length(cost)
    rollout = step_times(dataclasses.replace(cost, learner_token_s=0.0), steps)["grpo"]
    k = (TABLE3_7B["grpo"] - update) / rollout
    scaled = {f: getattr(cost, f) * k for f in ("decode_step_s", "row_token_s", "step_s", "prefill_s", "round_s")}
    return dataclasses.replace(cost, learner_token_s=learner, **scaled)


def compare(cost: GpuCost | None = None) -> dict[str, dict[str, Any]]:
    """Per row of Table 3 (`1.5B`, `7B`) and arm: the model's seconds and ratio to GRPO, the paper's, the relative
    error of the ratio, and whether the arm was fitted (1.5B) or is a check."""
    cost = cost or GpuCost()
    steps = paper_steps()
    out: dict[str, dict[str, Any]] = {}
    for row, model, paper in (
        ("1.5B", cost, TABLE3),
        ("7B", transfer_7b(cost, steps), TABLE3_7B),
    ):
        t = step_times(model, steps)
        out[row] = {
            arm: {
                "seconds": t[arm],
                "ratio": t[arm] / t["grpo"],
                "paper_ratio": paper[arm] / paper["grpo"],
                "error": (t[arm] / t["grpo"]) / (paper[arm] / paper["grpo"]) - 1,
                "fitted": row == "1.5B" and arm in FITTED,
            }
            for arm in paper
        }
    return out


def table(cost: GpuCost | None = None) -> str:
    """`compare` as a markdown table (the study's README quotes it)."""
    res = compare(cost)
    lines = ["| row | arm | model s | model ratio | paper ratio | error | |", "|---|---|---|---|---|---|---|"]
    for row, arms in res.items():
        for arm, r in arms.items():
            how = "fitted" if r["fitted"] else ("reference" if arm == "grpo" else "check")
            lines.append(
                f"| {row} | {arm} | {r['seconds']:.0f} | {r['ratio']:.2f} | {r['paper_ratio']:.2f} | "
                f"{round(r['error'], 2) + 0.0:+.0%} | {how} |"
            )
    return "\n".join(lines)
