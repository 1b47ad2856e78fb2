"""Per-sample advantages and per-prompt weights for training groups.

1) `group`: GRPO's baseline, mean (and optionally std) over the *kept* group.
2) `global`: Reinforce-Ada's baseline, mean (optionally std) over the *whole pool* drawn for the prompt this step
   (the official code's `global_stat_est`). A finished balanced group then carries A = 1 - p_hat for positives and
   -p_hat for negatives, p_hat being the pool's pass rate.
3) `maxrl`: MaxRL's mean-normalised advantage (arXiv 2602.02710; prime-rl's `max_rl`): (r - mean) / mean over the
   kept group, zero when the mean is <= 0 -- about a 1/p weight on a prompt with pass rate p, an estimator of the
   truncated maximum-likelihood objective. It assumes non-negative (canonically binary) rewards; `scale_std` does not
   apply (the mean is the scale).
4) `leave_one_out` (RLOO, Ahmadian et al. 2024, arXiv 2402.14740): each sample's baseline is the mean of the kept
   group's other samples, so it does not depend on the sample it scores and the estimate is unbiased (the group mean
   includes the sample and shrinks the gradient by (n - 1) / n); A_i = n / (n - 1) (r_i - mean). A group of one
   has no other sample: zero advantage. `scale_std` does not apply: the group's std includes the sample it would
   scale, so dividing by it biases the estimate (0.4 divided by it under `uniform` and `dynamic`, whose `scale_std`
   defaults on; RLOO is unscaled).
5) `tracker` (SPO, arXiv 2509.13232): the prompt's value estimate from before this step's samples
   (`Group.baseline`, the strategy's prompt memory by `estimator`), A = r - v_hat: unbiased for the same reason, and
   defined for a group of one. `scale_std` divides by sqrt(v_hat (1 - v_hat)), the Bernoulli std at v_hat.
6) `corrected`: the stratified-downsampling correction of the fork lemonchu/Reinforce-Ada-HM
   (`_grpo_corrected_advantages`, its `correct_bias` option) for balanced downsampling: with p the whole pool's pass
   rate and s the kept group's positives / negatives, positives get 1 - p^2 / (1 - p) and negatives -p s when
   p <= 1/2, else 1 - p and -(1 - p) s; divided by the pool's std when `scale_std`. A sample is positive iff its
   reward > 0.5 (the fork thresholds at its positive_threshold, 0.7: the same for 0/1 rewards). The fork reports no
   results for it; offered as its baseline, off by default.
Departures from the official code: the baseline is the mean of the raw rewards, not of rewards binarised at the
positive threshold, so format bonuses or partial credit stay correct; std uses the unbiased estimator with a floor.
Every estimator has one signature `(kept_R, pool_R, *, std, eps, baseline) -> adv_R` (`baseline`: the group's
`Group.baseline`, read by `tracker` only).

Batch normalisation (`batch_normalize`, SPO's): after every group's advantages, A <- (A - mean_B) / std_B over all
the step's trained samples (`samples`: each sample counts once, torch's unbiased std as the recipe; `tokens`: each
sample weighted by its completion tokens, the statistics of a token-mean loss, SPO++'s fix). Subtracting a batch
constant keeps an unbiased baseline unbiased only approximately, and dividing by std_B rescales the step.

Per-prompt weights come back separately (the loss multiplies them in): the strategy's own weight (Ada-Est's
residual 1/sqrt(p_hat)) times an optional explicit correction f'(p_hat) (paper v3 §3.2, "Oversample-Downsample-
Correct": downsampling removes the implicit weight N_x, so the gradient is multiplied back by 1/p_hat for the log
objective). The official code and v3's Algorithm 2 omit the correction, so it is off by default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.objectives import get_objective
from reinforce_ada.types import Group

AdvantageFn = Callable[..., np.ndarray]


def _center(rewards_R: np.ndarray, stats_R: np.ndarray, std: bool, eps: float) -> np.ndarray:
    if len(stats_R) == 0:
        return np.zeros_like(rewards_R)
    adv_R = rewards_R - stats_R.mean()
    if std:
        # unbiased std as in verl/torch.std; a single sample has no spread, so leave it unscaled
        sigma = stats_R.std(ddof=1) if len(stats_R) > 1 else 1.0
        adv_R = adv_R / (sigma + eps)
    return adv_R


def group_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = True, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """GRPO: statistics over the kept group only."""
    kept_R = np.asarray(kept_R, dtype=float)
    return _center(kept_R, kept_R, std, eps)


def global_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = False, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """Reinforce-Ada: statistics over every sample drawn for the prompt (a lower-variance baseline)."""
    return _center(np.asarray(kept_R, dtype=float), np.asarray(pool_R, dtype=float), std, eps)


def maxrl_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = False, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """MaxRL: (r - mean) / mean over the kept group; zeros when the mean is <= 0 (no correct sample, no signal).

    >>> maxrl_advantage(np.array([1.0, 0.0, 0.0, 0.0]), None).tolist()  # p = 1/4: the correct one gets 1/p - 1
    [3.0, -1.0, -1.0, -1.0]
    """
    kept_R = np.asarray(kept_R, dtype=float)
    mean = kept_R.mean() if len(kept_R) else 0.0
    return np.zeros_like(kept_R) if mean <= 0 else (kept_R - mean) / mean


def corrected_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = False, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """The HM fork's stratified correction (module docstring, 4).

    >>> corrected_advantage(np.array([1.0, 1.0, 0.0, 0.0]), np.array([1.0] * 8 + [0.0] * 24)).round(4).tolist()
    [0.9167, 0.9167, -0.25, -0.25]
    """
    kept_R, pool_R = np.asarray(kept_R, dtype=float), np.asarray(pool_R, dtype=float)
    pos_K = kept_R > 0.5
    n_pos, n_neg = int(pos_K.sum()), int((~pos_K).sum())
    p = float((pool_R > 0.5).mean()) if len(pool_R) else 0.0
    s = n_pos / n_neg if n_neg else float("inf")
    if p <= 0.5:
        adv_pos, scale = 1.0 - p * p / max(1.0 - p, 1e-12), p
    else:
        adv_pos, scale = 1.0 - p, 1.0 - p
    adv_neg = -scale * s if np.isfinite(s) else 0.0
    adv_K = np.where(pos_K, adv_pos, adv_neg)
    if std and len(pool_R) > 1:
        adv_K = adv_K / ((pool_R > 0.5).astype(float).std(ddof=1) + eps)
    return adv_K


def leave_one_out_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = False, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """RLOO (module docstring, 4); `std` is ignored (unscaled RLOO is the unbiased one).

    >>> leave_one_out_advantage(np.array([1.0, 0.0, 0.0, 0.0]), None, std=True).round(4).tolist()  # 1 - 0, 0 - 1/3
    [1.0, -0.3333, -0.3333, -0.3333]
    """
    kept_R = np.asarray(kept_R, dtype=float)
    n = len(kept_R)
    if n < 2:
        return np.zeros_like(kept_R)
    return kept_R - (kept_R.sum() - kept_R) / (n - 1)


def tracker_advantage(
    kept_R: np.ndarray, pool_R: np.ndarray, *, std: bool = False, eps: float = 1e-6, baseline: float | None = None
) -> np.ndarray:
    """SPO's baseline (module docstring, 5).

    >>> tracker_advantage(np.array([1.0, 0.0]), None, baseline=0.25).tolist()
    [0.75, -0.25]
    """
    if baseline is None:
        raise ConfigError(
            "advantage='tracker' needs the prompt's value estimate (Group.baseline), which every strategy of the "
            "package sets from its prompt memory; a group built elsewhere must set it"
        )
    adv_R = np.asarray(kept_R, dtype=float) - baseline
    return adv_R / (np.sqrt(baseline * (1.0 - baseline)) + eps) if std else adv_R


ADVANTAGES: dict[str, AdvantageFn] = {
    "group": group_advantage,
    "global": global_advantage,
    "leave_one_out": leave_one_out_advantage,
    "tracker": tracker_advantage,
    "maxrl": maxrl_advantage,
    "corrected": corrected_advantage,
}
NEEDS_VALUE = ("tracker",)
"""Which baselines read the strategy's per-prompt value estimate (`Group.baseline`)."""
BATCH_NORMS = ("none", "samples", "tokens")
CORRECTIONS = ("none", "objective")


def get_advantage(name: str) -> AdvantageFn:
    if name not in ADVANTAGES:
        raise ConfigError(f"unknown advantage {name!r}; choose one of {sorted(ADVANTAGES)}")
    return ADVANTAGES[name]


def compute_advantages(
    groups: Sequence[Group],
    *,
    estimator: str = "global",
    std: bool = False,
    correction: str = "none",
    objective: str = "log",
    alpha: float = 0.5,
    eps: float = 1e-6,
    normalize_weights: bool = True,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Return (per-group advantage arrays, per-group weights).

    `correction="objective"` multiplies each group's weight by f'(p_hat) with p_hat the pool's mean reward.
    `normalize_weights` rescales the weights of groups with signal to mean 1, so that a weighting changes how the
    gradient is split between prompts and not the effective learning rate (our choice; the paper does not say).
    """
    fn = get_advantage(estimator)
    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}; choose one of {list(CORRECTIONS)}")
    advs = [
        fn(
            np.asarray(g.rewards, dtype=float),
            np.asarray(g.pool_rewards, dtype=float),
            std=std,
            eps=eps,
            baseline=g.baseline,
        )
        for g in groups
    ]
    weights_G = np.array([g.weight for g in groups], dtype=float)
    if correction == "objective" and len(groups):
        p_G = np.array([np.mean(g.pool_rewards) if g.pool_rewards else 0.0 for g in groups])
        weights_G = weights_G * get_objective(objective)(p_G, alpha=alpha, eps=1e-3)
    if normalize_weights and len(groups):
        live_G = np.array([np.any(np.abs(a) > 0) for a in advs])
        if live_G.any():
            weights_G = weights_G / weights_G[live_G].mean()
    return advs, weights_G


def batch_normalize(groups: Sequence[Group], advs: list[np.ndarray], mode: str = "none") -> list[np.ndarray]:
    """(A - mean_B) / std_B over every trained sample of the step (module docstring); `mode` none, samples or tokens.

    >>> [a.round(4).tolist() for a in batch_normalize([], [np.array([1.0, 0.0]), np.array([0.0, -1.0])], "samples")]
    [[1.2247, 0.0], [0.0, -1.2247]]
    """
    if mode not in BATCH_NORMS:
        raise ConfigError(f"batch_normalize={mode!r} is not valid; choose one of {list(BATCH_NORMS)}")
    flat = np.concatenate(advs) if advs else np.zeros(0)
    if mode == "none" or len(flat) < 2:
        return advs
    if mode == "tokens":
        w = np.array([max(1, int(s.num_tokens)) for g in groups for s in g.samples], dtype=float)
        mu = float((w * flat).sum() / w.sum())
        sigma = float(np.sqrt((w * (flat - mu) ** 2).sum() / w.sum()))
    else:
        mu, sigma = float(flat.mean()), float(flat.std(ddof=1))
    return [(a - mu) / (sigma + 1e-8) for a in advs]


def zero_advantage(adv_R: np.ndarray, tol: float = 1e-9) -> bool:
    """True when a group gives no gradient (every advantage is zero)."""
    return bool(len(adv_R) == 0 or np.all(np.abs(adv_R) <= tol))
