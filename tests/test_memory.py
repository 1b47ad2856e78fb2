"""Cross-step prompt memory and the learned difficulty predictor: closed forms, learning, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import DifficultyPredictor, PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt


def test_visit_bookkeeping_and_tracker_closed_form():
    m = PromptMemory(make_options(Options, prior_alpha=2, prior_beta=3, decay=0.5, history=4))
    a = Prompt(id="a", text="")
    m.new_step()
    m.record(a, [True, True, True])
    assert m.visits == {"a": 1} and m.last_seen == {"a": 1} and m.streak == {"a": 1} and m.recent == {"a": "111"}
    m.new_step()
    m.record(a, [True, False, False])
    assert m.visits["a"] == 2 and m.last_seen["a"] == 2 and "a" not in m.streak and m.recent["a"] == "1100"
    assert m.posterior(a) == pytest.approx((0.5 * 3 + 1 + 2, 0.5 * 0 + 2 + 3))
    assert m.estimate(a) == pytest.approx((0.5 * 3 + 1 + 2) / (0.5 * 3 + 3 + 5))
    m.new_step()
    m.record(a, [False] * 2)
    m.new_step()
    m.record(a, [False] * 2)
    assert m.streak["a"] == -2 and m.recent["a"] == "0000" and m.recent_rate("a") == 0.0
    assert m.recent_rate("never") is None and m.last_stats == {"visits": 1, "all_correct": 0, "all_wrong": 1}


def test_recent_rate_needs_half_the_buffer():
    m = PromptMemory(make_options(Options, history=16))
    m.record(Prompt(id="x", text=""), [True] * 7)
    assert m.recent_rate("x") is None
    m.record(Prompt(id="x", text=""), [False])
    assert m.recent_rate("x") == pytest.approx(7 / 8)


def test_eviction_threshold():
    m = PromptMemory(make_options(Options, evict=1.0))
    m.record(Prompt(id="easy", text=""), [True] * 8)
    m.record(Prompt(id="mixed", text=""), [True] * 7 + [False])
    assert m.evicted == {"easy"}


def test_predictor_is_fitted_at_the_next_step_only():
    cfg = strategy_config(name="est", estimator="predictor")
    m = PromptMemory(cfg.options)
    p = Prompt(id="q", text="what is 2 + 2", level=1)
    before = m.estimate(p)
    m.record(p, [False] * 16)
    assert m.estimate(p) == before  # frozen within the step: both drivers see the same estimates
    m.new_step()
    assert m.estimate(p) < before
    assert m.pending == []


def test_both_uses_the_predictor_as_prior():
    m = PromptMemory(strategy_config(estimator="both", prior_alpha=1, prior_beta=3).options)
    p = Prompt(id="q", text="hello", level=0)
    mean = m.predictor.predict(p)
    assert m.posterior(p) == pytest.approx((4 * mean, 4 * (1 - mean)))
    m.record(p, [True, False])
    assert m.posterior(p) == pytest.approx((1 + 4 * mean, 1 + 4 * (1 - mean)))


def synthetic(n: int, seed: int, *, level: bool = True, probe: bool = False) -> tuple[list[Prompt], np.ndarray]:
    """Prompts whose logit is set by a level (and a noisy dense probe): a generic test problem, not the sim pool."""
    rng = np.random.default_rng(seed)
    lv = rng.integers(0, 6, n)
    z = -3.5 + lv + rng.normal(0, 0.4, n)
    prompts = [
        Prompt(
            id=str(i),
            text=f"question {rng.integers(10**6)} " + "x" * int(rng.integers(3, 30)),
            level=int(lv[i]) if level else None,
            meta={"features": [float(z[i] + rng.normal())]} if probe else {},
        )
        for i in range(n)
    ]
    return prompts, 1 / (1 + np.exp(-z))


@pytest.mark.parametrize(("level", "probe"), [(True, False), (False, True)])
def test_predictor_learns_difficulty_across_prompts(level, probe):
    prompts, rates = synthetic(1500, 0, level=level, probe=probe)
    rng = np.random.default_rng(1)
    pred = DifficultyPredictor()
    for i in rng.permutation(1000):  # the other 500 prompts are never visited: a cold start
        pred.update(prompts[i], int(rng.binomial(8, rates[i])), 8)
    held = range(1000, 1500)
    err = np.mean([abs(pred.predict(prompts[i]) - rates[i]) for i in held])
    const = np.mean([abs(rates[:1000].mean() - rates[i]) for i in held])
    beta11 = np.mean([abs(0.5 - rates[i]) for i in held])
    corr = np.corrcoef([pred.predict(prompts[i]) for i in held], rates[1000:])[0, 1]
    # measured: err 0.05 (levels) / 0.10 (probe) vs 0.22 for the best constant and 0.30 for Beta(1,1)'s 0.5
    assert err < 0.6 * const < beta11 and corr > 0.8


def test_predictor_state_round_trip_and_checks():
    prompts, rates = synthetic(50, 2, probe=True)
    a = DifficultyPredictor(dim=64)
    for p, r in zip(prompts, rates, strict=True):
        a.update(p, int(8 * r), 8)
    state = json.loads(json.dumps(a.state_dict()))
    b = DifficultyPredictor(dim=64)
    b.load_state_dict(state)
    assert [b.predict(p) for p in prompts] == [a.predict(p) for p in prompts]
    assert DifficultyPredictor(dim=64).predict(prompts[0]) == 0.5
    with pytest.raises(ValueError, match="dim"):
        DifficultyPredictor(dim=32).load_state_dict(state)
    with pytest.raises(ValueError, match="features"):
        a.predict(Prompt(id="z", text="", meta={"features": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="correct"):
        a.update(prompts[0], 9, 8)


def test_memory_checkpoints_with_every_strategy():
    prompts = [Prompt(id=f"p{i}", text=f"t{i}", level=i % 2) for i in range(6)]
    engine = SimulatedPolicy(prompts, [0.0, 1.0, 0.5, 0.2, 0.9, 0.1], SimConfig(lr=0.0, seed=1))
    for name in ("uniform", "seq", "est", "pilot_commit", "knapsack"):
        s = build_strategy(strategy_config(name=name, estimator="both"))
        collect(s, engine, prompts)
        evicted = set(s.memory.evicted)  # pilot_commit: p1 (always right) is skipped from now on
        collect(s, engine, prompts[:3])
        state = json.loads(json.dumps(s.state_dict()))
        t = build_strategy(strategy_config(name=name, estimator="both"))
        t.load_state_dict(state)
        assert t.memory.state_dict() == s.memory.state_dict() and t.memory.step == 2
        assert t.memory.estimate(prompts[5]) == s.memory.estimate(prompts[5])
        assert sum(s.memory.visits.values()) == len(prompts) + len({"p0", "p1", "p2"} - evicted)
        assert evicted == ({"p1"} if name == "pilot_commit" else set())


def test_est_loads_a_checkpoint_from_before_the_memory():
    s = build_strategy(strategy_config(name="est"))
    state = s.state_dict()
    del state["memory"]
    state["extra"]["tracker"] = {"counts": {"old": [3.0, 4.0]}}
    s.load_state_dict(state)
    assert s.tracker.estimate("old") == pytest.approx(4 / 6)


# --- (was tests/test_memory_forget.py) --------------------------------------------------------------------------------
# `forget`: a prompt's counts are read discounted by forget^(steps since its last visit).


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
