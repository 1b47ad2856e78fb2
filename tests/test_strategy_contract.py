"""The contract every registered strategy meets: traits and options that describe it truthfully, one step in both
drivers, exact state round-trips, a plan. A strategy added to the registry is checked here with no edit to this file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.sampling.admission import ADMISSIONS
from reinforce_ada.sampling.advantages import ADVANTAGES
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.options import Options, option_specs, resolved_evict
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import STRATEGIES, build_strategy, strategy_class
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.sampling.traits import PLANNERS, Traits
from reinforce_ada.simulation.plan import plan
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt

NAMES = list(STRATEGIES)
SMALL = {"max_samples": 8, "samples_per_round": 4, "pilot": 4, "candidates": 2}


def small(name: str) -> StrategyConfig:
    """Small sizes, for the options the strategy has."""
    own = strategy_class(name).Options.__dataclass_fields__
    return strategy_config(name=name, **{k: v for k, v in SMALL.items() if k in own})


def pool(size: int = 24, seed: int = 0) -> tuple[list[Prompt], SimulatedPolicy]:
    rates = np.random.default_rng(seed).uniform(0.0, 1.0, size)
    prompts = [Prompt(id=f"c{i}", text=f"prompt {i}") for i in range(size)]
    return prompts, SimulatedPolicy(prompts, rates.tolist(), SimConfig(lr=0.0, seed=seed))


def source(prompts: list[Prompt], start: int):
    """A prompt source that hands out fresh prompts in order and is exhausted at the end."""
    state = {"next": start}

    def more(k: int) -> list[Prompt]:
        out = prompts[state["next"] : state["next"] + k]
        state["next"] += len(out)
        return out

    return more


@pytest.mark.parametrize("name", NAMES)
def test_traits_and_options_describe_the_strategy(name):
    cls = strategy_class(name)
    t = cls.traits
    assert isinstance(t, Traits) and t.planner in PLANNERS
    assert issubclass(cls.Options, Options) and cls.Options.__dataclass_params__.frozen
    for spec in option_specs(cls.Options):  # every option is documented, and one name has one type everywhere
        assert spec.help, f"{name}: option {spec.name} has no help"
        for other in STRATEGIES.values():
            theirs = other.Options.__dataclass_fields__.get(spec.name)
            assert theirs is None or str(theirs.type) == spec.type, f"{spec.name}: {spec.type} vs {theirs.type}"
    cfg = strategy_config(name=name)  # the defaults validate
    assert cfg.options.advantage in ADVANTAGES and cfg.options.scale_std == (
        cfg.options.advantage == "group"
    )  # GRPO's std, or the pool's
    assert cfg.options.select in ADMISSIONS and resolved_evict(cfg.options) in (None, 1.0)
    if t.planner == "allocation":
        counts = cls.plan_counts(np.array([0.1, 0.5, 0.9]), cfg.options, 24)
        assert len(counts) == 3 and all(cfg.options.min_samples <= int(k) <= cfg.options.max_samples for k in counts)
    assert cls.cost_hint(cfg.options) > 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("driver", ["rounds", "streaming"])
def test_one_step_in_each_driver_and_state_round_trips(name, driver):
    prompts, policy = pool()
    strategy = build_strategy(small(name))
    batch_prompts, more = prompts[:8], source(prompts, 8)
    if driver == "rounds":
        batch = collect(strategy, policy, batch_prompts, more_prompts=more)
    else:
        batch = collect_streaming(strategy, policy.streaming(64, None, seed=0), batch_prompts, more_prompts=more)
    assert batch.ledger.samples_generated > 0 and batch.groups
    for g in batch.groups:
        assert len(g.samples) >= 1 and len(g.rewards) == len(g.samples)
    state = json.loads(json.dumps(strategy.state_dict()))  # JSON-serialisable
    twin = build_strategy(small(name))
    twin.load_state_dict(state)
    assert json.dumps(twin.state_dict(), sort_keys=True) == json.dumps(state, sort_keys=True)


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_has_a_plan(name):
    cfg = small(name)
    rows = plan(cfg, [0.2, 0.6])
    assert len(rows) == 2
    for r in rows:
        assert 0.0 <= r.zero_signal <= 1.0 and r.expected_samples > 0
