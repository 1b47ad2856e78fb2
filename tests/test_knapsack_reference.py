"""Knapsack RL's released code vs its paper: both allocations and both pass-rate estimates, each against a brute
force of its own definition (issue 21, item 6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.strategies import build_strategy, knapsack_allocate
from reinforce_ada.sampling.strategies.est import knapsack_value
from reinforce_ada.types import Prompt


def brute(p, budget, lo, hi, value):
    """Exhaustive search over allocations summing to the budget (the DP's feasible set)."""
    best = -1.0
    for n in itertools.product(range(lo, hi + 1), repeat=len(p)):
        if sum(n) != budget:
            continue
        if value == "total":
            v = sum(knapsack_value(pi, ni) for pi, ni in zip(p, n, strict=True))
        else:  # the released DP: nothing beyond lo scores 0, k more score value(p, lo + k)
            v = sum(knapsack_value(pi, ni) if ni > lo else 0.0 for pi, ni in zip(p, n, strict=True))
        best = max(best, v)
    return best


def score(p, n, lo, value):
    if value == "total":
        return sum(knapsack_value(pi, ni) for pi, ni in zip(p, n, strict=True))
    return sum(knapsack_value(pi, ni) if ni > lo else 0.0 for pi, ni in zip(p, n, strict=True))


@pytest.mark.parametrize("value", ["total", "reference"])
def test_greedy_reaches_the_brute_force_optimum_of_each_objective(value):
    rng = np.random.default_rng(0)
    for _ in range(60):
        b = int(rng.integers(2, 4))
        p = rng.uniform(0.02, 0.98, b).round(2)
        lo, hi = 2, int(rng.integers(3, 7))
        budget = int(rng.integers(lo * b, hi * b + 1))
        n = knapsack_allocate(p, budget, lo, hi, value)
        assert n.sum() == budget and (n >= lo).all() and (n <= hi).all()
        assert score(p, n, lo, value) == pytest.approx(brute(p, budget, lo, hi, value), abs=1e-12)


def test_the_two_objectives_allocate_differently_on_some_cases():
    rng = np.random.default_rng(1)
    differ = 0
    for _ in range(200):
        p = rng.uniform(0.02, 0.98, 3).round(2)
        a = knapsack_allocate(p, 12, 2, 6, "total")
        b = knapsack_allocate(p, 12, 2, 6, "reference")
        differ += int((a != b).any())
    assert 0 < differ < 200


def test_last_visit_estimate_uses_the_whole_latest_visit():
    mem = PromptMemory(make_options(Options, history=16))
    x = Prompt(id="x", text="")
    mem.record(x, [True] * 16 + [False] * 16)  # a 16-of-32 visit, the correct ones first
    assert mem.recent_rate("x") == 0.0  # the paper's "last 16 rewards"
    assert mem.recent_rate("x", rule="last_visit") == 0.5
    mem.record(x, [True] * 4)  # a small visit: both fall back to the last 16 outcomes
    assert mem.recent_rate("x", rule="last_visit") == mem.recent_rate("x") == 4 / 16
    twin = PromptMemory(make_options(Options, history=16))
    twin.load_state_dict(mem.state_dict())
    assert twin.last_visit == mem.last_visit


def test_options_reach_the_strategy_and_bad_values_name_the_field():
    s = build_strategy(strategy_config(name="knapsack", knapsack_value="reference", knapsack_estimate="last_visit"))
    assert s.cfg.options.knapsack_value == "reference"
    with pytest.raises(ConfigError, match="knapsack_value"):
        strategy_config(knapsack_value="dp")
    with pytest.raises(ConfigError, match="knapsack_estimate"):
        strategy_config(knapsack_estimate="ema")
