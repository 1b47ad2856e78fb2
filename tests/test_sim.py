"""Simulated policy and the simulate command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.cli import main
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy, hard_pool
from reinforce_ada.types import Prompt, Request


def test_frozen_policy_matches_its_pass_rates():
    prompts = [Prompt(id="a", text=""), Prompt(id="b", text="")]
    sim = SimulatedPolicy(prompts, [0.2, 1.0], SimConfig(lr=0.0))
    s = sim.generate([Request(prompts[0], 20000), Request(prompts[1], 10)])
    assert np.mean([x.reward for x in s[:20000]]) == pytest.approx(0.2, abs=0.015)
    assert all(x.reward == 1.0 for x in s[20000:])


def test_learning_raises_pass_rate():
    prompts, rates = hard_pool(200, seed=1)
    sim = SimulatedPolicy(prompts, rates, SimConfig(lr=0.3))
    strat = build_strategy(strategy_config())
    before = sim.pass_rates().mean()
    stream = PromptOrder(prompts, 0)
    for _ in range(30):
        b = collect(strat, sim, stream.take(32))
        sim.update(b.groups, b.advantages, b.weights)
    assert sim.pass_rates().mean() > before + 0.05


def test_hard_pool_is_hard():
    _, rates = hard_pool(5000, seed=0)
    assert (rates < 0.2).mean() > 0.75


def test_bad_pass_rate_names_prompt():
    with pytest.raises(ValueError, match="'b'"):
        SimulatedPolicy([Prompt(id="a", text=""), Prompt(id="b", text="")], [0.1, 2.0])


def test_stream_no_repeats_within_a_draw_and_covers_epoch():
    prompts = [Prompt(id=str(i), text="") for i in range(10)]
    s = PromptOrder(prompts, 0)
    seen = []
    for _ in range(5):
        got = s.take(3, exclude={"0"})
        assert len({p.id for p in got}) == 3 and "0" not in {p.id for p in got}
        seen += [p.id for p in got]
    state = s.state_dict()
    nxt = [p.id for p in s.take(4)]
    s2 = PromptOrder(prompts, 0)
    s2.load_state_dict(state)
    assert [p.id for p in s2.take(4)] == nxt


def test_parse_arm():
    base = strategy_config()
    assert parse_arm("uniform:n=16", base).options.n == 16
    assert parse_arm("seq:exit=positive,k_pos=none", base).options.k_pos is None
    assert parse_arm("est:scale_std=true", base).options.scale_std is True
    with pytest.raises(ValueError, match="bogus"):
        parse_arm("seq:bogus=1", base)


def test_simulate_cli_writes_curves(tmp_path, capsys):
    out = tmp_path / "sim"
    assert (
        main(
            [
                "simulate",
                "--strategies",
                "uniform;seq",
                "--steps",
                "5",
                "--seeds",
                "2",
                "--batch-size",
                "8",
                "--pool-size",
                "50",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    res = json.loads(out.with_suffix(".json").read_text())
    assert set(res["arms"]) == {"uniform", "seq"}
    assert len(res["arms"]["seq"]["runs"]) == 2 and len(res["arms"]["seq"]["median"]["pass_rate"]) == 6
    assert out.with_suffix(".png").stat().st_size > 1000
    assert "no-signal share" in capsys.readouterr().out


def test_simulate_says_what_it_is_for_and_that_it_does_not_pick_a_strategy(tmp_path, capsys):
    """Issue 40 item 7: fed exact pass rates the simulator ranked arms no better than samples per step, so its help,
    its output and its docstring say it checks mechanics and does not predict which strategy wins."""
    import reinforce_ada.simulation.simulate as sim
    from reinforce_ada.cli import main

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "does not predict which strategy wins" in " ".join(capsys.readouterr().out.split())
    argv = ["simulate", "--strategies", "uniform", "--steps", "1", "--seeds", "1", "--batch-size", "4"]
    assert main([*argv, "--pool-size", "8", "--out", str(tmp_path / "s")]) == 0
    assert "reinforce-ada compare" in capsys.readouterr().err
    assert "NOT a predictor of which allocator wins" in sim.__doc__


# --- (was tests/test_outputs_kept.py) ---------------------------------------------------------------------------------
# Default outputs never overwrite an earlier run's (issue 25: `simulate` overwrote runs/simulate.*).


def test_simulate_default_output_moves_to_a_free_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "--strategies", "uniform", "--steps", "2", "--seeds", "1", "--pool-size", "64"]
    assert main([*argv, "--batch-size", "8"]) == 0
    first = (tmp_path / "runs/simulate.json").read_bytes()
    assert main([*argv, "--batch-size", "4"]) == 0
    assert (tmp_path / "runs/simulate.json").read_bytes() == first  # kept
    assert (tmp_path / "runs/simulate-1.json").exists() and "runs/simulate-1.json" in capsys.readouterr().out
    assert main([*argv, "--batch-size", "4", "--out", "runs/simulate"]) == 0  # named explicitly: replaced
    assert (tmp_path / "runs/simulate.json").read_bytes() != first
