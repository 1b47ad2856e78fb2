"""Advantages and objective weights: hand-computed examples, including the official code's edge groups."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import compute_advantages, global_advantage, group_advantage, zero_advantage
from reinforce_ada.sampling.objectives import get_objective
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
