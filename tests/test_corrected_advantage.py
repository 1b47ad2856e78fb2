"""The HM fork's stratified-downsampling correction (issue 23 baseline): its formula case by case, and through Seq."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.sampling.advantages import corrected_advantage
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt


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
