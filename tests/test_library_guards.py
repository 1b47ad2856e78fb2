"""Guards for library callers that bypass the config and CLI checks (issue 21's remaining cases)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reinforce_ada.engines.hf import check_sampling
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.sampling.memory import PassRateTracker
from reinforce_ada.types import Prompt, Sample


@pytest.mark.parametrize("t", [math.nan, math.inf, -1.0])
def test_engines_refuse_a_temperature_that_is_not_finite_and_non_negative(t):
    with pytest.raises(ConfigError, match="temperature"):
        check_sampling(max_new_tokens=4, temperature=t, top_p=1.0, top_k=0, stop=())


@pytest.mark.parametrize(("value", "reward", "errors"), [("1.0", 0.0, 1), (None, 0.0, 1), (np.bool_(True), 1.0, 0)])
def test_a_plain_callable_reward_is_a_real_number_or_a_counted_error(value, reward, errors):
    samples = [Sample(prompt_id="p", text="x")]
    assert score(samples, {"p": Prompt(id="p", text="", answer="1")}, lambda c, a: value) == errors
    assert samples[0].reward == reward


def test_a_tracker_state_with_impossible_counts_is_refused():
    t = PassRateTracker(alpha=1.0, beta=1.0, decay=0.9)
    t.load_state_dict({"counts": {"a": [1.0, 2.0]}})
    for bad in ([-1.0, 2.0], [3.0, 2.0], [math.nan, 2.0]):
        with pytest.raises(ValueError, match="0 <= correct <= total"):
            t.load_state_dict({"counts": {"a": bad}})
    assert t.counts == {"a": (1.0, 2.0)}  # unchanged by a refused state
