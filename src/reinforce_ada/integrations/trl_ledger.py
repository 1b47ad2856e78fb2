"""The step's ledger over all processes, and the row count every process pads its trained rows to.

Each process runs the strategy on its own prompts and keeps its own `sampling.ledger.Ledger`. One gather of a fixed
vector per step reduces them as each metric requires:
1) counts are summed (prompts, samples and tokens generated, trained, unresolved, dropped, verifier errors);
2) shares are recomputed from summed counts, not averaged (zero_adv_prompt_share = zero-advantage prompts / trained
   prompts; no_signal_prompt_share = 1 - prompts with signal / prompts sampled), and so are the means
   (reward_first_round = mean over every process's prompts of the first round's mean reward);
3) rounds (this process's strategy rounds), the longest completion, engine ticks (rounds all processes took part in)
   and generation time take the maximum.
The same gather carries each process's trained-row count: all pad to the largest, rounded up to the config's
`rows_multiple`, because TRL gathers per-row tensors and splits the batch into equal slices.
`padded_rows` counts padding rows, `dummy_rows` the generated rows a process made only to take part in a round.
`check_verifier_errors` stops the run when too many of the step's samples (over all processes, so every process stops
together) had no usable reward: a dead reward service must not train on for days with zero loss and exit 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.trainer_utils import get_last_checkpoint

from reinforce_ada.sampling.ledger import StepBatch
from reinforce_ada.sampling.protocol import PoolStrategy

LEDGER_COUNTS = (
    "prompts",
    "samples_generated",
    "tokens_generated",
    "samples_trained",
    "tokens_trained",
    "prompts_trained",
    "zero_adv_prompts",
    "unresolved_prompts",
    "dropped_prompts",
    "verifier_errors",
)
"""Ledger fields summed as they are."""
SUMMED = (
    *LEDGER_COUNTS,
    "dummy_rows",
    "padded_rows",
    "with_signal",
    "sampled",
    "first_round_sum",
    "first_round_count",
    "reward_trained_sum",
    "reward_trained_count",
)
MAXED = ("rounds", "max_completion_tokens", "ticks", "time_generate_s", "rows")
LOGGED = (
    "prompts",
    "samples_generated",
    "tokens_generated",
    "samples_trained",
    "tokens_trained",
    "zero_adv_prompt_share",
    "no_signal_prompt_share",
    "unresolved_prompts",
    "dropped_prompts",
    "rounds",
    "max_completion_tokens",
    "reward_first_round",
    "reward_trained",
    "verifier_errors",
    "time_generate_s",
    "dummy_rows",
    "padded_rows",
)


def local_counts(batch: StepBatch, strategy: PoolStrategy, engine: Any, rows: int) -> dict[str, float]:
    led = batch.ledger
    first = [float(np.mean(r)) for r in strategy.first_round_rewards().values()]
    kept = [r for g in batch.groups for r in g.rewards]
    return {
        **{k: float(getattr(led, k)) for k in LEDGER_COUNTS},
        "dummy_rows": float(engine.dummy_rows),
        "padded_rows": 0.0,
        "with_signal": float(led.prompts_trained - led.zero_adv_prompts),
        "sampled": float(led.prompts - led.extra.get("overflow_prompts", 0)),
        "first_round_sum": float(sum(first)),
        "first_round_count": float(len(first)),
        "reward_trained_sum": float(sum(kept)),
        "reward_trained_count": float(len(kept)),
        "rounds": float(led.rounds),
        "max_completion_tokens": float(led.max_completion_tokens),
        "ticks": float(engine.ticks),
        "time_generate_s": float(led.time_generate_s),
        "rows": float(rows),
    }


def derive(c: dict[str, float]) -> dict[str, Any]:
    """Shares and means from (summed) counts."""
    out: dict[str, Any] = dict(c)
    out["zero_adv_prompt_share"] = c["zero_adv_prompts"] / max(1.0, c["prompts_trained"])
    out["no_signal_prompt_share"] = 1.0 - c["with_signal"] / max(1.0, c["sampled"])
    out["reward_first_round"] = c["first_round_sum"] / c["first_round_count"] if c["first_round_count"] else math.nan
    out["reward_trained"] = (
        c["reward_trained_sum"] / c["reward_trained_count"] if c["reward_trained_count"] else math.nan
    )
    return out


def reduce_ledger(
    trainer: Any, batch: StepBatch, strategy: PoolStrategy, engine: Any, rows: int
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """(this process's ledger, the ledger over all processes, the row count every process pads to)."""
    mine = local_counts(batch, strategy, engine, rows)
    keys = SUMMED + MAXED
    acc = trainer.accelerator
    vec = torch.tensor([mine[k] for k in keys], dtype=torch.float64, device=acc.device)
    table = acc.gather(vec).view(-1, len(keys)).cpu().numpy() if acc.num_processes > 1 else vec.cpu().numpy()[None]
    total = {k: float(table[:, i].sum()) for i, k in enumerate(SUMMED)}
    total.update({k: float(table[:, len(SUMMED) + i].max()) for i, k in enumerate(MAXED)})
    multiple = trainer.args.rows_multiple
    target = max(multiple, math.ceil(total["rows"] / multiple) * multiple)
    mine["padded_rows"] = float(target - rows)
    total["padded_rows"] = float(target * len(table) - table[:, keys.index("rows")].sum())
    local = derive(mine)
    local["extra"] = dict(batch.ledger.extra)
    return local, derive(total), target


def log_ledger(metrics: dict[str, list], total: dict[str, Any]) -> None:
    """Append the reduced ledger to TRL's metrics (averaged over the logging window like TRL's own)."""
    for k in LOGGED:
        metrics[f"ada/{k}"].append(float(total[k]))


class RewardsFailedError(RuntimeError):
    """Too many of a step's samples had no usable reward (`AdaGRPOConfig.max_verifier_error_share`)."""


def check_verifier_errors(total: dict[str, Any], limit: float, output_dir: str, step: int) -> None:
    """Raise `RewardsFailedError` when the reduced ledger's share of samples with a failed reward exceeds `limit`,
    saying where the last checkpoint is. Called on the reduced ledger, so every process raises in the same step."""
    samples = total["samples_generated"]
    share = total["verifier_errors"] / samples if samples else 0.0
    if share <= limit:
        return
    last = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
    where = (
        f"the last checkpoint is {last} (fix the reward functions, then trainer.train(resume_from_checkpoint=True))"
        if last
        else f"no checkpoint was saved in {output_dir} yet"
    )
    raise RewardsFailedError(
        f"step {step + 1}: {int(total['verifier_errors'])} of {int(samples)} samples ({share:.0%}) had no usable "
        f"reward (a reward function raised or gave NaN/inf, or all gave None), more than max_verifier_error_share="
        f"{limit}: the reward functions look broken (a dead reward service?), so training stopped before this step "
        f"updated the model; {where}. Raise max_verifier_error_share (1.0 never stops) if this is expected."
    )
