"""Length levers (`sampling.length`): a per-sample cap, absolute or relative to the prompt's correct answers,
decided when the prompt joins the step, honoured by the engines, a capped sample scored as wrong; the decode work
of cancelled samples counted; the integrations that cannot honour a cap refuse it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.length import cap_for, capped, refuse_length_cap
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt, Sample


def test_an_absolute_cap_cuts_every_sample_there_and_a_cut_sample_is_wrong():
    prompts = [Prompt(f"q{i}", f"q{i}") for i in range(8)]
    policy = SimulatedPolicy(prompts, [0.9] * 8, SimConfig(lr=0.0, seed=0, mean_tokens=50.0))
    free = collect(build_strategy(strategy_config("uniform", n=4)), policy, prompts)
    s = build_strategy(strategy_config("uniform", n=4, length_cap="absolute", cap_tokens=40))
    cut = collect(s, policy, prompts)
    samples = [x for pool in s.pools.values() for x in pool]
    assert max(x.num_tokens for x in samples) == 40 and cut.ledger.tokens_generated < free.ledger.tokens_generated
    assert all(x.reward == 0.0 for x in samples if x.finish_reason == "length")  # cut: wrong
    assert any(x.reward == 1.0 for x in samples)
    assert s.caps == {p.id: 40 for p in prompts} and s.state_dict()["caps"] == s.caps


def test_a_relative_cap_follows_the_prompts_own_correct_answers():
    opts = strategy_config("spo", length_cap="relative", cap_ratio=1.5, cap_floor=8).options
    m = PromptMemory(opts)
    a, b = Prompt("a", "a"), Prompt("b", "b")
    assert cap_for(opts, m, a) is None  # no correct answer anywhere yet: no cap
    m.record(a, [True, False], tokens=[20, 90])
    assert cap_for(opts, m, a) == 30  # 1.5 x its correct length (the wrong 90-token answer does not count)
    assert cap_for(opts, m, b) is None  # no correct answer of its own: no cap, whatever other prompts' lengths
    m.record(b, [True], tokens=[2])
    assert cap_for(opts, m, b) == 8  # never below the floor
    twin = PromptMemory(opts)
    twin.load_state_dict(json.loads(json.dumps(m.state_dict())))
    assert cap_for(opts, twin, a) == 30


def test_only_a_sample_cut_at_its_own_cap_is_capped():
    assert capped(Sample("p", num_tokens=10, finish_reason="length"), 10)
    assert not capped(Sample("p", num_tokens=9, finish_reason="eos"), 10)
    assert not capped(Sample("p", num_tokens=64, finish_reason="length"), None)  # the engine's own max_new_tokens


def test_the_options_exist_only_with_their_cap_and_bad_values_are_named():
    with pytest.raises(ConfigError, match=r"cap_tokens \(an option of length_cap=absolute"):
        strategy_config("uniform", cap_tokens=64)
    with pytest.raises(ConfigError, match="cap_ratio=0.5 is out of range"):
        strategy_config("uniform", length_cap="relative", cap_ratio=0.5)
    with pytest.raises(ConfigError, match=r"length_cap='short' is not valid; choose one of \['none', 'absolute'"):
        strategy_config("uniform", length_cap="short")
    with pytest.raises(ConfigError, match="ada.length_cap='relative' is not supported by the verl plugin"):
        refuse_length_cap("relative", "the verl plugin", option="ada.length_cap")


def test_the_trainer_caps_its_samples_and_counts_cancelled_decode_work(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer
    from tests.helpers import train_config

    cap = {"name": "uniform", "n": 2, "length_cap": "absolute", "cap_tokens": 2}
    tr = Trainer(train_config(model_dir, tmp_path / "run", cap, generation={"max_new_tokens": 6}), tensorboard=False)
    m = tr.train_step()
    samples = [x for pool in tr.strategy.pools.values() for x in pool]
    tr.close()
    assert max(x.num_tokens for x in samples) <= 2 and m["max_completion_tokens"] <= 2
    assert all(x.reward == 0.0 for x in samples if capped(x, 2))
    seq = {"name": "seq", "samples_per_round": 2, "max_samples": 8}
    gen = {"max_new_tokens": 6, "streaming": True, "in_flight": "cancel", "prefetch": True}
    tr = Trainer(train_config(model_dir, tmp_path / "run2", seq, generation=gen), tensorboard=False)
    m = tr.train_step()
    tr.close()
    assert isinstance(m["cancelled_tokens"], int) and m["cancelled_tokens"] >= 0  # the engine's own count


def test_a_token_budget_prices_each_sample_at_its_prompts_expected_length():
    """est budget_unit=tokens: a prompt whose answers run 10x longer gets about a tenth of the samples for the same
    weight, the step spends the sample budget at the batch's mean length, and the rules that price samples refuse it."""
    from reinforce_ada.sampling.strategies.priced import greedy, proportional

    n = proportional(np.array([1.0, 1.0, 1.0]), np.array([100.0, 10.0, 10.0]), 8 * 3 * 40.0, 1, 64)
    assert n.tolist() == [3, 32, 32] and float((n * [100, 10, 10]).sum()) <= 8 * 3 * 40.0
    gains = np.array([[0.5, 0.25], [0.5, 0.25]])
    assert greedy(gains, np.array([4.0, 1.0]), 4.0 + 1.0 + 1.0 + 1.0, 1).tolist() == [1, 3]  # per token, not per sample
    prompts = [Prompt("long", "x"), Prompt("short", "y")]
    s = build_strategy(strategy_config("est", budget_unit="tokens", budget=16, min_samples=1, max_samples=32))
    s.memory.record(prompts[0], [True, False], tokens=[90, 110])
    s.memory.record(prompts[1], [True, False], tokens=[9, 11])
    s.begin(prompts)
    assert s.alloc["short"] > 4 * s.alloc["long"]
    # prompts never drawn: priced by their level's lengths (before, every one cost the mean over all samples, and the
    # token budget bought exactly what the sample budget buys)
    fresh = [Prompt("new-long", "x2", level=8), Prompt("new-short", "y2", level=1)]
    t = build_strategy(strategy_config("est", budget_unit="tokens", budget=16, min_samples=1, max_samples=32))
    t.memory.record(Prompt("seen-long", "x", level=8), [True, False], tokens=[90, 110])
    t.memory.record(Prompt("seen-short", "y", level=1), [True, False], tokens=[9, 11])
    t.begin(fresh)
    assert t.alloc["new-short"] > 4 * t.alloc["new-long"]
    with pytest.raises(ConfigError, match="budget_unit='tokens' applies to allocation"):
        strategy_config("est", budget_unit="tokens", allocation="knapsack")
