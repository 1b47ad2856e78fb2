"""Advantages and objective weights: hand-computed examples, including the official code's edge groups."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import (
    compute_advantages,
    corrected_advantage,
    global_advantage,
    group_advantage,
    maxrl_advantage,
    zero_advantage,
)
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.objectives import get_objective
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Group, Prompt, Sample


def group(kept, pool, weight=1.0):
    return Group(Prompt(id="x", text=""), [Sample("x", reward=r) for r in kept], list(pool), weight=weight)


def test_balanced_edge_group_one_of_32():
    pool = [1.0] + [0.0] * 31
    adv = global_advantage(np.array([1.0, 0.0, 0.0, 0.0]), np.array(pool), std=False)
    assert adv == pytest.approx([31 / 32, -1 / 32, -1 / 32, -1 / 32])


def test_balanced_edge_group_31_of_32():
    pool = [1.0] * 31 + [0.0]
    adv = global_advantage(np.array([1.0, 1.0, 1.0, 0.0]), np.array(pool), std=False)
    assert adv == pytest.approx([1 / 32, 1 / 32, 1 / 32, -31 / 32])


def test_positive_exit_all_correct_is_zero_advantage():
    adv = global_advantage(np.ones(4), np.ones(8), std=False)
    assert zero_advantage(adv)


def test_group_std_matches_grpo():
    r = np.array([1.0, 0.0, 0.0, 0.0])
    adv = group_advantage(r, r, std=True, eps=1e-6)
    assert adv == pytest.approx((r - 0.25) / (np.std(r, ddof=1) + 1e-6))


def test_non_binary_rewards_are_not_binarised():
    kept = np.array([0.9, 0.2])
    pool = np.array([0.9, 0.2, 0.6, 0.1])
    assert global_advantage(kept, pool, std=False) == pytest.approx(kept - 0.45)


def test_global_std_single_sample_pool_is_unscaled():
    assert global_advantage(np.array([1.0]), np.array([1.0]), std=True) == pytest.approx([0.0])


def test_correction_and_weight_normalisation():
    g1, g2 = group([1, 0], [1, 0, 0, 0]), group([1, 0], [1, 1, 1, 0])
    _, w = compute_advantages([g1, g2], correction="objective", objective="log", normalize_weights=False)
    assert w == pytest.approx([1 / 0.25, 1 / 0.75])
    _, w = compute_advantages([g1, g2], correction="objective", objective="log")
    assert w.mean() == pytest.approx(1.0) and w[0] / w[1] == pytest.approx(3.0)
    _, w = compute_advantages([g1, g2])
    assert w == pytest.approx([1.0, 1.0])


def test_unknown_names():
    with pytest.raises(ConfigError, match="global"):
        compute_advantages([], estimator="rloo")
    with pytest.raises(ConfigError, match="objective"):
        compute_advantages([], correction="inv_p")
    with pytest.raises(ConfigError, match="log"):
        get_objective("exp")


def test_objectives():
    p = np.array([0.0, 0.25, 1.0])
    assert get_objective("linear")(p) == pytest.approx([1, 1, 1])
    assert get_objective("log")(p, eps=1e-3) == pytest.approx([1000, 4, 1])
    assert get_objective("power")(np.array([0.25]), alpha=0.5) == pytest.approx([1.0])
    custom = get_objective(lambda p, **_: 2 * p)
    assert custom(np.array([0.5])) == pytest.approx([1.0])


# --- (was tests/test_corrected_advantage.py) --------------------------------------------------------------------------
# The HM fork's stratified-downsampling correction (issue 23 baseline): its formula case by case, and through Seq.


def fork(p: float, s: float) -> tuple[float, float]:
    """The fork's rule as its docstring states it."""
    if p <= 0.5:
        return 1 - p * p / (1 - p), -p * s
    return 1 - p, -(1 - p) * s


@pytest.mark.parametrize(("pos_pool", "pool", "kept_pos", "kept_neg"), [(8, 32, 2, 2), (3, 32, 2, 2), (24, 32, 3, 1)])
def test_formula(pos_pool, pool, kept_pos, kept_neg):
    pool_R = np.array([1.0] * pos_pool + [0.0] * (pool - pos_pool))
    kept_R = np.array([1.0] * kept_pos + [0.0] * kept_neg)
    a_pos, a_neg = fork(pos_pool / pool, kept_pos / kept_neg)
    assert np.allclose(corrected_advantage(kept_R, pool_R), [a_pos] * kept_pos + [a_neg] * kept_neg)


def test_no_kept_negative_and_uniform_pools():
    assert corrected_advantage(np.array([1.0, 1.0]), np.array([1.0, 1.0, 0.0])).tolist() == [1 - (2 / 3)] * 2
    assert corrected_advantage(np.zeros(4), np.zeros(32)).tolist() == [0.0] * 4


def test_through_seq_balanced():
    cfg = strategy_config(name="seq", advantage="corrected", max_samples=16, samples_per_round=8)
    prompts = [Prompt(id=f"c{i}", text="") for i in range(12)]
    policy = SimulatedPolicy(prompts, [0.2] * 6 + [0.7] * 6, SimConfig(lr=0.0, seed=1))
    batch = collect(build_strategy(cfg), policy, prompts)
    for g, adv in zip(batch.groups, batch.advantages, strict=True):
        assert np.allclose(adv, corrected_advantage(np.array(g.rewards), np.array(g.pool_rewards)))


# --- (was tests/test_maxrl.py) ----------------------------------------------------------------------------------------
# MaxRL's mean-normalised advantage (issue 23 baseline): closed form, the config name, a step end to end.


@pytest.mark.parametrize("k", [1, 2, 3])
def test_closed_form_weights_a_prompt_by_one_over_its_pass_rate(k):
    r = np.array([1.0] * k + [0.0] * (4 - k))
    p = k / 4
    adv = maxrl_advantage(r, r)
    assert np.allclose(adv[:k], 1 / p - 1) and np.allclose(adv[k:], -1.0)
    assert adv.sum() == pytest.approx(0.0)  # centred, like GRPO
    grpo = r - r.mean()
    assert np.allclose(adv, grpo / p)  # = GRPO's centred reward times 1/p


def test_no_correct_sample_or_negative_mean_gives_zero():
    assert maxrl_advantage(np.zeros(4), None).tolist() == [0.0] * 4
    assert maxrl_advantage(np.array([-1.0, 0.0]), None).tolist() == [0.0, 0.0]


def test_config_name_and_a_step():
    cfg = strategy_config(name="uniform", n=4, advantage="maxrl")
    prompts = [Prompt(id=f"m{i}", text="") for i in range(16)]
    policy = SimulatedPolicy(prompts, [0.25] * 16, SimConfig(lr=0.0, seed=0))
    batch = collect(build_strategy(cfg), policy, prompts)
    for g, a in zip(batch.groups, batch.advantages, strict=True):
        r = np.array(g.rewards)
        assert np.allclose(a, maxrl_advantage(r, r))
    with pytest.raises(ConfigError, match="advantage"):
        strategy_config(advantage="max_rl")


def test_compute_advantages_by_name():
    s = [Sample(prompt_id="x", reward=r, index=i) for i, r in enumerate([1.0, 0.0])]
    g = Group(Prompt(id="x", text=""), s, [1.0, 0.0])
    advs, _ = compute_advantages([g], estimator="maxrl")
    assert advs[0].tolist() == [1.0, -1.0]
