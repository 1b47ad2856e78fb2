"""Token-level clipped policy-gradient loss, a pure function of tensors.

1) Per token, ratio r = exp(logp - old_logp) and loss = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)): PPO's
   clipped surrogate with DAPO's asymmetric "clip-higher" bounds (0.2 / 0.28 by default). On-policy (one update per
   batch) r = 1 and this is plain REINFORCE with a baseline, as in the Reinforce-Ada paper.
2) Dual clip (Ye et al. 2020, verl's `clip_ratio_c`): for A < 0 the loss is also capped at dual_clip * |A|, so a
   token whose ratio exploded cannot dominate the batch. `dual_clip=None` turns it off; it must be > 1.
3) The advantage is A_B * weight_B, broadcast over the tokens: the strategy's per-prompt weight (e.g. an objective's
   f'(p)) scales every token of that prompt's samples.
4) Aggregation is a registry of functions with one signature, `(loss_BT, mask_BT) -> scalar`, and the same one
   reduces the entropy and KL terms. Sequence means average over sequences with at least one token. Gradient
   accumulation: `aggregation_units` counts what an aggregation averages over (tokens, or non-empty sequences);
   scaling each micro-batch's loss by its units / the batch's units gives exactly the full-batch loss, also when
   some completions are empty, and a micro-batch with 0 units (only empty completions) is skipped: it has no
   gradient to give.
5) loss = pg - entropy_coef * H + kl_coef * KL(pi || ref), KL by Schulman's k3 estimator exp(ref - logp) -
   (ref - logp) - 1 (unbiased and >= 0 for samples from pi). Both terms are off by default (the paper uses neither).
6) Sampler/learner mismatch (`importance_weights`): when the old log-probs are recomputed by the learner, the
   samples still came from the sampler; each token's loss is multiplied by w = pi_learner_old / pi_sampler (per
   token, or its product over the sequence), truncated at a cap or masked above it -- TRL's four modes
   (`vllm_importance_sampling_mode`), the truncated-IS of Yao et al. with cap 2 being `token_truncate`.

Log-ratios are clamped to [-20, 20] before exp (as verl does) so a stale token cannot overflow. Padded positions may
hold anything (even inf): every reduction selects with the mask instead of multiplying by it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch

from reinforce_ada.errors import ConfigError

LOG_RATIO_CLAMP = 20.0

AggregationFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _masked(x_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    return torch.where(mask_BT.bool(), x_BT, torch.zeros((), dtype=x_BT.dtype, device=x_BT.device))


def token_mean(loss_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Mean over every valid token in the batch: long completions weigh more (DAPO)."""
    return _masked(loss_BT, mask_BT).sum() / mask_BT.sum().clamp(min=1)


def seq_mean_token_mean(loss_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Mean over tokens within a sequence, then over sequences (the original GRPO)."""
    n_B = mask_BT.sum(dim=-1)
    seq_B = _masked(loss_BT, mask_BT).sum(dim=-1) / n_B.clamp(min=1)
    return seq_B.sum() / (n_B > 0).sum().clamp(min=1)


def seq_mean_token_sum(loss_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Sum over tokens within a sequence, mean over sequences (Dr. GRPO up to a constant)."""
    n_B = mask_BT.sum(dim=-1)
    return _masked(loss_BT, mask_BT).sum() / (n_B > 0).sum().clamp(min=1)


AGGREGATIONS: dict[str, AggregationFn] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
}


AGGREGATION_UNITS: dict[str, Callable[[Sequence[int]], int]] = {
    "token-mean": lambda lengths: sum(lengths),
    "seq-mean-token-mean": lambda lengths: sum(n > 0 for n in lengths),
    "seq-mean-token-sum": lambda lengths: sum(n > 0 for n in lengths),
}
"""What each aggregation divides by, given the completions' lengths (see `aggregation_units`)."""


def aggregation_units(name: str, lengths: Sequence[int]) -> int:
    """How many units (tokens for token-mean, non-empty sequences for the seq-mean aggregations) `name` averages
    over in a batch of completions of these lengths: the weight of a micro-batch in gradient accumulation."""
    get_aggregation(name)
    return int(AGGREGATION_UNITS[name](lengths))


def get_aggregation(name: str) -> AggregationFn:
    if name not in AGGREGATIONS:
        raise ConfigError(f"unknown loss aggregation {name!r}; choose one of {sorted(AGGREGATIONS)}")
    return AGGREGATIONS[name]


@dataclass
class LossOutput:
    """The loss to backpropagate and detached statistics (token means over the mask unless noted)."""

    loss: torch.Tensor
    """The loss to backpropagate: the policy-gradient term, minus entropy_coef x entropy, plus kl_coef x kl."""
    pg_loss: float
    """The clipped policy-gradient term alone, aggregated."""
    clip_frac: float
    """Share of tokens where a clip bound is active (zero gradient): clip_frac_low + clip_frac_high."""
    clip_frac_low: float
    """Share of tokens with A < 0 and ratio r < 1 - clip_low."""
    clip_frac_high: float
    """Share of tokens with A > 0 and ratio r > 1 + clip_high."""
    dual_clip_frac: float
    """Share of tokens with A < 0 and ratio r > dual_clip."""
    approx_kl: float
    """k3 estimate of KL(old || new), (r - 1) - log r: 0 on-policy."""
    ratio_mean: float
    """Mean policy ratio pi_theta / pi_old over the tokens."""
    entropy: float
    """Aggregated entropy (0.0 when no entropy_BT was given)."""
    kl: float
    """Aggregated k3 KL to the reference (0.0 when no ref_logp_BT was given)."""

    def metrics(self, prefix: str = "loss/") -> dict[str, float]:
        """Floats for a tracker; `loss` as its value."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "loss"}
        return {prefix + k: v for k, v in {"loss": float(self.loss.detach()), **out}.items()}


IS_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_weights(
    learner_logp_BT: torch.Tensor, sampler_logp_BT: torch.Tensor, mask_BT: torch.Tensor, *, mode: str, cap: float
) -> tuple[torch.Tensor, float]:
    """`(w_BT, affected share)`: the importance weight of each token and the share of valid tokens it truncated or
    masked. `sequence_*` modes use exp(sum over the sequence of log-ratios) for every token of the sequence."""
    if mode not in IS_MODES:
        raise ConfigError(f"unknown importance-sampling mode {mode!r}; choose one of {list(IS_MODES)}")
    mask_BT = mask_BT.bool()
    if mode == "none":
        return torch.ones_like(learner_logp_BT), 0.0
    log_w_BT = _masked((learner_logp_BT - sampler_logp_BT).detach(), mask_BT)
    if mode.startswith("sequence"):
        log_w_BT = log_w_BT.sum(dim=-1, keepdim=True).expand_as(learner_logp_BT)
    w_BT = log_w_BT.clamp(max=LOG_RATIO_CLAMP).exp()
    over_BT = (w_BT > cap) & mask_BT
    w_BT = w_BT.clamp(max=cap) if mode.endswith("truncate") else w_BT.masked_fill(over_BT, 0.0)
    return _masked(w_BT, mask_BT), float(over_BT.sum() / mask_BT.sum().clamp(min=1))


def _check_shapes(logp_BT: torch.Tensor, adv_B: torch.Tensor, **others: torch.Tensor | None) -> None:
    if logp_BT.dim() != 2:
        raise ConfigError(f"logp_BT must be 2-D (batch, tokens), got shape {tuple(logp_BT.shape)}")
    B = logp_BT.shape[0]
    if adv_B.shape != (B,):
        raise ConfigError(
            f"adv_B must have shape ({B},) to match logp_BT {tuple(logp_BT.shape)}, got {tuple(adv_B.shape)}"
        )
    for name, t in others.items():
        want = (B,) if name.endswith("_B") else tuple(logp_BT.shape)
        if t is not None and tuple(t.shape) != want:
            raise ConfigError(f"{name} must have shape {want} to match logp_BT, got {tuple(t.shape)}")


def _check_coefs(clip_low, clip_high, dual_clip, entropy_coef, entropy_BT, kl_coef, ref_logp_BT) -> None:
    if not (0.0 <= clip_low < 1.0 and clip_high >= 0.0):
        raise ConfigError(f"need 0 <= clip_low < 1 and clip_high >= 0, got clip_low={clip_low}, clip_high={clip_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ConfigError(f"dual_clip must be > 1 (or None to disable), got {dual_clip}")
    if entropy_coef and entropy_BT is None:
        raise ConfigError("entropy_coef is set but no entropy_BT was given")
    if kl_coef and ref_logp_BT is None:
        raise ConfigError("kl_coef is set but no ref_logp_BT was given")


def policy_loss(
    logp_BT: torch.Tensor,
    old_logp_BT: torch.Tensor,
    adv_B: torch.Tensor,
    mask_BT: torch.Tensor,
    *,
    weight_B: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float | None = 10.0,
    agg: str = "token-mean",
    entropy_BT: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    ref_logp_BT: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    is_weight_BT: torch.Tensor | None = None,
) -> LossOutput:
    """Clipped policy-gradient loss; only `logp_BT` and `entropy_BT` carry gradient (the rest are detached).

    `is_weight_BT` multiplies each token's policy-gradient loss (the sampler -> learner importance weight)."""
    aggregate = get_aggregation(agg)
    _check_shapes(
        logp_BT,
        adv_B,
        old_logp_BT=old_logp_BT,
        mask_BT=mask_BT,
        weight_B=weight_B,
        entropy_BT=entropy_BT,
        ref_logp_BT=ref_logp_BT,
        is_weight_BT=is_weight_BT,
    )
    _check_coefs(clip_low, clip_high, dual_clip, entropy_coef, entropy_BT, kl_coef, ref_logp_BT)
    mask_BT = mask_BT.bool()
    adv_B = adv_B.detach().to(logp_BT.dtype)
    if weight_B is not None:
        adv_B = adv_B * weight_B.detach().to(logp_BT.dtype)
    adv_BT = adv_B.unsqueeze(-1).expand_as(logp_BT)

    log_ratio_BT = (logp_BT - old_logp_BT.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio_BT = log_ratio_BT.exp()
    unclipped_BT = -adv_BT * ratio_BT
    clipped_BT = -adv_BT * ratio_BT.clamp(1.0 - clip_low, 1.0 + clip_high)
    pg_BT = torch.maximum(unclipped_BT, clipped_BT)
    if dual_clip is not None:
        pg_BT = torch.where(adv_BT < 0, torch.minimum(pg_BT, -adv_BT * dual_clip), pg_BT)
    if is_weight_BT is not None:
        pg_BT = pg_BT * is_weight_BT.detach().to(pg_BT.dtype)
    pg_loss = aggregate(pg_BT, mask_BT)
    loss = pg_loss

    entropy = torch.zeros((), device=logp_BT.device)
    if entropy_BT is not None:
        entropy = aggregate(entropy_BT, mask_BT)
        loss = loss - entropy_coef * entropy
    kl = torch.zeros((), device=logp_BT.device)
    if ref_logp_BT is not None:
        ref_log_ratio_BT = (ref_logp_BT.detach() - logp_BT).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        kl = aggregate(ref_log_ratio_BT.exp() - ref_log_ratio_BT - 1.0, mask_BT)
        loss = loss + kl_coef * kl

    with torch.no_grad():
        n = mask_BT.sum().clamp(min=1)

        def frac(x_BT: torch.Tensor) -> float:
            return float((x_BT & mask_BT).sum() / n)

        low, high = frac((adv_BT < 0) & (ratio_BT < 1.0 - clip_low)), frac((adv_BT > 0) & (ratio_BT > 1.0 + clip_high))
        return LossOutput(
            loss=loss,
            pg_loss=float(pg_loss),
            clip_frac=low + high,
            clip_frac_low=low,
            clip_frac_high=high,
            dual_clip_frac=frac((adv_BT < 0) & (ratio_BT > dual_clip)) if dual_clip is not None else 0.0,
            approx_kl=float(_masked(ratio_BT - 1.0 - log_ratio_BT, mask_BT).sum() / n),
            ratio_mean=float(_masked(ratio_BT, mask_BT).sum() / n),
            entropy=float(entropy),
            kl=float(kl),
        )
