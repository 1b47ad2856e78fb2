"""The learner's passes over a step's rows: the PPO "old" policy and the gradient-accumulated policy loss.

1) `old_logprobs` (`optim.old_logprobs="recompute"`, and every replayed row): one no-grad forward fills each row's
   `old_logp` with the learner's log-probs before the update (as verl) and feeds the sampler/learner mismatch metrics
   (`training.drift`).
2) `accumulate` runs forward and backward over a minibatch in micro-batches of `optim.micro_batch_size`: the loss is
   `losses.policy_loss` with the importance weight sampler -> learner (`optim.is_correction`) and, on replayed rows,
   the truncated ratio to their behaviour log-probs (`training.replay`). Each micro-batch's loss is scaled by its
   share of the minibatch's aggregation units (`losses.aggregation_units`: tokens, or non-empty sequences for the
   seq-mean aggregations), so the accumulated gradient equals the full-batch one; a micro-batch with 0 units is
   skipped. The optimizer step, its guard and the lr schedule stay in `trainer.Trainer.update`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from reinforce_ada.models.forward import right_pad, sequence_logprobs
from reinforce_ada.training.drift import Drift
from reinforce_ada.training.losses import aggregation_units, importance_weights, policy_loss
from reinforce_ada.training.replay import fresh_mask, replay_weights
from reinforce_ada.training.rows import Row


@torch.no_grad()
def old_logprobs(
    model: Any, rows: list[Row], drift: Any, micro_batch_size: int, pad_id: int, temperature: float, autocast: Callable
) -> None:
    """Fill each row's `old_logp` with the learner's log-probs before the update, and feed them to `drift` (the
    sampler/learner mismatch metrics)."""
    for lo in range(0, len(rows), micro_batch_size):
        micro = rows[lo : lo + micro_batch_size]
        with autocast():
            logp, mask, _ = sequence_logprobs(
                model,
                [r.prompt_ids for r in micro],
                [r.completion_ids for r in micro],
                pad_id,
                temperature=temperature,
            )
        drift.add(logp, micro, mask)
        for b, r in enumerate(micro):
            r.old_logp = logp[b, : len(r.completion_ids)].float().tolist()


def accumulate(
    model: Any,
    ref: Any,
    mb: list[Row],
    cfg: Any,
    pad_id: int,
    autocast: Callable,
    *,
    replay: bool,
    drift: Drift | None = None,
) -> tuple[float, float, float, bool]:
    """Backward over micro-batches of `mb` (`cfg` a TrainConfig; `ref` the KL reference model or None; `replay`:
    whether replayed rows get their truncated importance weight); returns (loss, entropy, clip fraction, all
    finite). A non-finite micro-batch loss stops at once, leaving the gradient the caller must discard."""
    o, temp = cfg.optim, cfg.generation.temperature
    denom = aggregation_units(o.agg, [len(r.completion_ids) for r in mb])
    total_loss = total_ent = total_clip = 0.0
    device = next(model.parameters()).device
    for lo in range(0, len(mb), o.micro_batch_size):
        micro = mb[lo : lo + o.micro_batch_size]
        units = aggregation_units(o.agg, [len(r.completion_ids) for r in micro])
        if units == 0:  # only empty completions: nothing the aggregation counts, and no gradient
            continue
        share = units / denom
        prompts, comps = [r.prompt_ids for r in micro], [r.completion_ids for r in micro]
        with autocast():
            logp, mask, ent = sequence_logprobs(model, prompts, comps, pad_id, temperature=temp, with_entropy=True)
            ref_logp = None
            if ref is not None:
                with torch.no_grad():
                    ref_logp = sequence_logprobs(ref, prompts, comps, pad_id, temperature=temp)[0]
        if drift is not None:
            drift.add(logp.detach(), micro, fresh_mask(micro, mask))
        sampler, _ = right_pad([r.sampler_logp for r in micro], device=device)
        old, _ = right_pad([r.sampler_logp if r.old_logp is None else r.old_logp for r in micro], device=device)
        is_weight = None
        if cfg.is_correction != "none":
            is_weight, _ = importance_weights(old, sampler, mask, mode=cfg.is_correction, cap=o.is_cap)
        if replay:  # replayed rows: min(pi_old / pi_behaviour, replay.clip), of the answer or of each token
            is_weight = replay_weights(micro, old, sampler, mask, cfg.replay.clip, is_weight, cfg.replay.correction)
        res = policy_loss(
            logp,
            old,
            torch.tensor([r.adv for r in micro], device=device),
            mask,
            weight_B=torch.tensor([r.weight for r in micro], device=device),
            clip_low=o.clip_low,
            clip_high=o.clip_high,
            dual_clip=o.dual_clip,
            agg=o.agg,
            entropy_BT=ent,
            entropy_coef=o.entropy_coef,
            ref_logp_BT=ref_logp,
            kl_coef=o.kl_coef,
            is_weight_BT=is_weight,
        )
        if not torch.isfinite(res.loss):
            return float("nan"), float("nan"), float("nan"), False
        (res.loss * share).backward()
        total_loss += float(res.loss.detach()) * share
        total_ent += res.entropy * share
        total_clip += res.clip_frac * share
    return total_loss, total_ent, total_clip, True
