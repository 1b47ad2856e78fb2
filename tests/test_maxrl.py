"""MaxRL's mean-normalised advantage (issue 23 baseline): closed form, the config name, a step end to end."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import compute_advantages, maxrl_advantage
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Group, Prompt, Sample


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
