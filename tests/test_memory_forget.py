"""`forget`: a prompt's counts are read discounted by forget^(steps since its last visit)."""

from __future__ import annotations

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.types import Prompt


def test_an_old_belief_widens_back_toward_the_prior():
    p = Prompt(id="a", text="1+1=", answer="2")
    m = PromptMemory(make_options(Options, decay=1.0, forget=0.5))
    m.new_step()
    m.record(p, [False] * 8)
    assert m.posterior(p) == (1.0, 9.0)  # read in the same step: no discount
    m.new_step()
    m.new_step()
    assert m.posterior(p) == pytest.approx((1.0, 1.0 + 8 * 0.25))  # two steps later: counts x 0.5^2
    assert m.tracker.counts["a"] == (0.0, 8.0)  # what is stored does not change
    off = PromptMemory(make_options(Options, decay=1.0))
    off.new_step()
    off.record(p, [False] * 8)
    off.new_step()
    assert off.posterior(p) == (1.0, 9.0)


def test_forget_is_a_strategy_option_checked_at_parse():
    assert PromptMemory(parse_arm("uniform:select=value,forget=0.9").options).forget == 0.9
    for bad in ("0", "1.5", "-0.1"):
        with pytest.raises(ConfigError, match="forget"):
            parse_arm(f"uniform:select=value,forget={bad}")
