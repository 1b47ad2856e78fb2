"""The learner's rows: one sampled completion with its prompt tokens, advantage and weight (the passes over them
are `training.learner`'s)."""

from __future__ import annotations

import dataclasses
from typing import Any

from reinforce_ada.sampling.ledger import StepBatch


@dataclasses.dataclass
class Row:
    prompt_ids: list[int]
    completion_ids: list[int]
    sampler_logp: list[float]
    """The sampler's log-prob of each completion token."""
    adv: float
    weight: float
    old_logp: list[float] | None = None
    """The learner's log-probs before the update (`old_logprobs="recompute"`); None: the sampler's are the old ones."""
    replayed: bool = False
    """A stored earlier answer (`training.replay`): `sampler_logp` holds its behaviour log-probs."""


def batch_rows(batch: StepBatch, tokenizer: Any, prompt_ids: dict[str, list[int]]) -> list[Row]:
    """One row per trained sample of the step; `prompt_ids` caches each prompt's tokens across steps."""
    rows = []
    for g, adv_R, w in zip(batch.groups, batch.advantages, batch.weights, strict=True):
        if g.prompt.id not in prompt_ids:
            prompt_ids[g.prompt.id] = tokenizer(g.prompt.text, add_special_tokens=False)["input_ids"]
        for s, a in zip(g.samples, adv_R, strict=True):
            rows.append(Row(prompt_ids[g.prompt.id], s.token_ids, s.logprobs, float(a), float(w)))
    return rows
