"""Round 4 of the adversarial cases (issue 52) that live in the sampling core: each failed on 0.4."""

from __future__ import annotations

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PromptMemory


def test_an_arm_spec_giving_an_option_twice_is_refused_not_last_wins():
    with pytest.raises(ConfigError, match=r"decay is given twice \('0.5' and '0.7'\)"):
        parse_arm("spo:decay=0.5,decay=0.7")


def test_prior_alpha_and_beta_whose_sum_overflows_are_refused():
    with pytest.raises(ConfigError, match="their sum .* overflows"):
        strategy_config("uniform", prior_alpha=1e308, prior_beta=1e308)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"visits": "3"}, r"visits='3' must be a whole number"),
        ({"visits": -1}, r"visits=-1 must be a whole number"),
        ({"w": {"0": "x"}}, r"weight '0' = 'x' must be a finite number"),
        ({"w": {"99999999": 1.0}}, r"weight '99999999' = 1.0 must be a finite number at an index"),
        ({"w": {"1": float("nan")}}, r"weight '1' = nan"),
    ],
)
def test_a_damaged_predictor_state_is_refused_at_load_naming_the_key(bad, match):
    m = PromptMemory(strategy_config("est", estimator="both", predictor_dim=8).options)
    state = m.state_dict()
    state["predictor"] = {**state["predictor"], **bad}
    fresh = PromptMemory(strategy_config("est", estimator="both", predictor_dim=8).options)
    with pytest.raises(ValueError, match=match):
        fresh.load_state_dict(state)
    assert fresh.predictor.visits == 0  # nothing half-loaded
