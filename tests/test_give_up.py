"""When Seq's give-up rule can act (issue 21, item 7): the docstring's numbers, and that it changes the run exactly
where `give_up_point` says it can."""

from __future__ import annotations

import pytest

from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.strategies.seq import give_up_point, resolve_chance
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt

DEFAULT = dict(max_samples=32, samples_per_round=8, k_pos=2, k_neg=2)


def test_docstring_chances():
    first = [resolve_chance(0, d, 32 - d, 1, 1, k_pos=2, k_neg=2) for d in (8, 16, 24)]
    assert [round(x, 3) for x in first] == [0.523, 0.227, 0.053]
    again = [resolve_chance(0, d, 32 - d, 1, 33, k_pos=2, k_neg=2) for d in (8, 16, 24)]
    assert [round(x, 3) for x in again] == [0.133, 0.058, 0.013]


def test_give_up_point_at_the_default_cap():
    assert give_up_point(**DEFAULT, give_up=0.05, a=1, b=1) is None  # never on a first visit
    assert give_up_point(**DEFAULT, give_up=0.1, a=1, b=1) == 24
    assert give_up_point(**DEFAULT, give_up=0.05, a=1, b=33) == 24  # after one all-wrong visit


@pytest.mark.parametrize(("give_up", "fires"), [(0.05, False), (0.1, True)])
def test_first_visit_hopeless_prompts_are_given_up_only_where_the_point_says(give_up, fires):
    prompts = [Prompt(id=f"h{i}", text="") for i in range(50)]
    policy = SimulatedPolicy(prompts, [0.0] * 50, SimConfig(lr=0.0, seed=0))
    strategy = build_strategy(strategy_config(give_up=give_up))
    batch = collect(strategy, policy, prompts)
    m = strategy.metrics()
    if fires:
        assert m["given_up_prompts"] == 50 and batch.ledger.samples_generated == 50 * 24
    else:
        assert m["given_up_prompts"] == 0 and batch.ledger.samples_generated == 50 * 32
