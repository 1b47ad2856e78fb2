"""Conformal stopping (trl-cgrpo 0.2.0's rule, `sampling.strategies.conformal`): the conformal arithmetic on hand-made
scores, the stopping rule on scripted outcome sequences, budgets on the grid, the calibration schedule, checkpoints,
the planner against the closed form, the CLI, one trainer step and the config errors."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.strategies.conformal import (
    auto_delta,
    conformal_quantile,
    first_success_law,
    first_success_score,
    pass_rate_score,
    resolves,
)
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.plan import plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt, Sample

T, F = 1.0, 0.0


class Scripted:
    """An engine whose k-th sample of a prompt has the k-th reward of that prompt's script."""

    def __init__(self, scripts: dict[str, list[float]]):
        self.scripts, self.drawn = scripts, defaultdict(int)

    def generate(self, requests):
        out = []
        for r in requests:
            for _ in range(r.k):
                i = self.drawn[r.prompt.id]
                out.append(Sample(prompt_id=r.prompt.id, reward=self.scripts[r.prompt.id][i], num_tokens=1))
                self.drawn[r.prompt.id] += 1
        return out


def source(prompts: list[Prompt]):
    state = {"next": 0}

    def more(k: int) -> list[Prompt]:
        out = prompts[state["next"] : state["next"] + k]
        state["next"] += len(out)
        return out

    return more


def sim_pool(size: int, seed: int = 0) -> tuple[list[Prompt], SimulatedPolicy]:
    rates = np.random.default_rng(seed).uniform(0.0, 1.0, size)
    prompts = [Prompt(id=f"q{i}", text=f"prompt {i}") for i in range(size)]
    return prompts, SimulatedPolicy(prompts, rates.tolist(), SimConfig(lr=0.0, seed=seed))


# -- the conformal arithmetic -----------------------------------------------------------------------------------------
def test_quantile_is_the_finite_sample_corrected_order_statistic():
    s = [0.4, 0.1, 0.3, 0.2]
    assert conformal_quantile(s, 0.5) == 0.3  # ceil(5 * 0.5) = 3rd smallest
    assert conformal_quantile(s, 0.95) == 0.1  # ceil(5 * 0.05) = 1st
    assert conformal_quantile(s, 0.05) == 0.4  # ceil(5 * 0.95) = 5 > n: the largest
    assert conformal_quantile([], 0.1) == 1.0


def test_scores_on_hand_made_outcomes():
    assert first_success_score([False, False, True, False], 4) == 0.75
    assert first_success_score([False, True], 2) == 1.0  # a success at the last position scores like none
    assert first_success_score([False, False, True], 2) == 1.0  # only the first k count
    assert pass_rate_score([True, False, True, False], 4) == 0.5
    assert pass_rate_score([False] * 8, 8) == 1.0


def test_stopping_rule_on_hand_made_outcomes():
    assert resolves([False, True], 2, 1.0, "first_success")  # qhat 1: any success stops
    assert not resolves([False, False], 2, 1.0, "first_success")  # never without a success
    assert resolves([True, False], 2, 0.5, "first_success") and not resolves([False, True], 2, 0.5, "first_success")
    assert resolves([True, True, True, False], 4, 0.25, "pass_rate")  # 1 - 3/4 <= 0.25
    assert not resolves([True, True, False, False], 4, 0.25, "pass_rate")


def test_auto_delta_is_the_miss_rate_plus_margin_clipped():
    delta, solve = auto_delta([0.5, 1.0, 1.0, 0.25], 0.05)
    assert solve == 0.5 and delta == pytest.approx(0.55)
    assert auto_delta([0.1, 0.2], 0.05)[0] == 0.05 and auto_delta([1.0, 1.0], 0.05)[0] == 0.95
    assert auto_delta([], 0.05) == (0.95, 0.0)


# -- the strategy on scripted outcomes --------------------------------------------------------------------------------
CAL = {  # first-success scores at budgets 2 / 4 / 8
    "c0": [T, F, F, F, F, F, F, F],  # 0.5, 0.25, 0.125
    "c1": [F, T, F, F, F, F, F, F],  # 1.0, 0.5, 0.25
    "c2": [F, F, F, T, F, F, F, F],  # 1.0, 1.0, 0.5
    "c3": [F] * 8,  # 1.0, 1.0, 1.0
}
TRAIN = {
    "t0": [F, T, F, F, F, F, F, F],  # success at 2: 2/2 <= qhat_2 = 1.0, stops at 2
    "t1": [F, F, T, F, F, F, F, F],  # 3/4 > 0.5, 3/8 > 0.25: unresolved at 8
    "t2": [F, F, F, F, F, F, F, F],  # no success: unresolved at 8
    "t3": [T, T, T, T, T, T, T, T],  # stops at 2
}


def scripted_step(**cfg):
    c = strategy_config(name="conformal", budget_grid="2/4/8", max_samples=8, calibration_prompts=4, **cfg)
    strategy = build_strategy(c)
    engine = Scripted({**CAL, **TRAIN})
    train = [Prompt(id=p, text="") for p in TRAIN]
    batch = collect(strategy, engine, train, more_prompts=source([Prompt(id=p, text="") for p in CAL]))
    return strategy, batch


def test_calibration_and_stopping_on_scripted_outcomes():
    # delta 0.65: ceil(5 * 0.35) = 2nd smallest score per budget -> qhat = 1.0, 0.5, 0.25
    strategy, batch = scripted_step(conformal_delta=0.65)
    assert strategy.qhat == [1.0, 0.5, 0.25]
    assert strategy.cal_scores == [[0.5, 0.25, 0.125], [1.0, 0.5, 0.25], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]]
    drawn = {g.prompt.id: len(g.samples) for g in batch.groups}
    assert drawn == {"t0": 2, "t1": 8, "t2": 8, "t3": 2}  # calibration prompts are not trained on
    assert {g.prompt.id: g.resolved for g in batch.groups} == {"t0": True, "t1": False, "t2": False, "t3": True}
    m = batch.ledger.as_metrics()
    assert m["samples_generated"] == 4 * 8 + 20 and m["calibration_samples"] == 32
    assert m["unresolved_prompts"] == 2 and m["prompts_at_budget_2"] == 2 and m["prompts_at_budget_8"] == 2
    assert m["qhat_4"] == 0.5 and m["calibrated"] and m["mean_budget"] == 5.0
    assert m["rollout_savings"] == pytest.approx(1 - 20 / 32)


def test_automatic_delta_and_its_split():
    strategy, _ = scripted_step()  # solve rate 3/4 at k_max -> delta 0.3 -> ceil(5 * 0.7) = 4th = the largest
    assert strategy.delta == pytest.approx(0.3) and strategy.solve_rate == 0.75
    assert strategy.qhat == [1.0, 1.0, 1.0]
    strategy, _ = scripted_step(split_delta=True)  # delta from c0, c1 (both solved): 0.05; thresholds from c2, c3
    assert strategy.delta == 0.05 and strategy.solve_rate == 1.0 and strategy.qhat == [1.0, 1.0, 1.0]
    assert len(strategy.cal_scores) == 4


def test_pass_rate_score():
    # pass-rate scores at 2 / 4 / 8: c0 .5 .75 .875, c1 .5 .75 .875, c2 1 .75 .875, c3 1 1 1; 2nd smallest each
    strategy, batch = scripted_step(conformal_score="pass_rate", conformal_delta=0.65)
    assert strategy.qhat == [0.5, 0.75, 0.875]
    drawn = {g.prompt.id: len(g.samples) for g in batch.groups}
    assert drawn == {"t0": 2, "t1": 4, "t2": 8, "t3": 2}  # t1: 1 - 1/4 = 0.75 <= 0.75 at budget 4


# -- budgets, schedule, checkpoints -----------------------------------------------------------------------------------
@pytest.mark.parametrize("driver", ["rounds", "streaming"])
def test_budgets_are_always_on_the_grid_and_every_sample_is_counted(driver):
    prompts, policy = sim_pool(400, seed=1)
    cfg = strategy_config(name="conformal", calibration_prompts=40, recalibrate_every=2)
    grid = (2, 4, 8, 16, 32)
    strategy, more = build_strategy(cfg), source(prompts[16:])
    for step in range(3):
        batch_prompts = prompts[:16]
        if driver == "rounds":
            batch = collect(strategy, policy, batch_prompts, more_prompts=more)
        else:
            batch = collect_streaming(strategy, policy.streaming(64, None, seed=step), batch_prompts, more_prompts=more)
        m = batch.ledger.as_metrics()
        assert len(batch.groups) == 16 and all(len(g.samples) in grid for g in batch.groups)
        assert all(g.pool_rewards == g.rewards for g in batch.groups)  # every drawn sample is trained on
        assert sum(m[f"prompts_at_budget_{k}"] for k in grid) == 16
        assert m["samples_generated"] == m["samples_trained"] + m["calibration_samples"]
        assert m["calibration_samples"] == (40 * 32 if step in (0, 2) else 0)


def run_steps(cfg: StrategyConfig, steps: int, pool_size: int = 600, source_from: int = 0) -> list[bool]:
    prompts, policy = sim_pool(pool_size)
    strategy, more = build_strategy(cfg), source(prompts[8:])
    flags = []
    for step in range(steps):
        batch = collect(strategy, policy, prompts[:8], more_prompts=more if step >= source_from else None)
        flags.append(batch.ledger.extra["calibrated"])
    return flags


def test_calibration_schedule():
    cfg = strategy_config(name="conformal", calibration_prompts=10)
    assert run_steps(cfg.replace(recalibrate_every=2), 5) == [True, False, True, False, True]
    assert run_steps(cfg.replace(recalibrate_every=0), 4) == [True, False, False, False]
    assert run_steps(cfg, 3) == [True, False, False]  # the default, every 50 steps
    # no prompt source at step 0: the calibration set is empty, qhat stays 1.0 and calibration is tried again
    assert run_steps(cfg.replace(recalibrate_every=3), 5, source_from=1) == [False, True, False, False, True]


def test_state_round_trips_exactly_mid_calibration():
    prompts, policy = sim_pool(200, seed=2)
    cfg = strategy_config(name="conformal", calibration_prompts=12, recalibrate_every=1, seed=3)
    a = build_strategy(cfg)
    collect(a, policy, prompts[:6], more_prompts=source(prompts[6:]))
    assert len(a.cal_scores) == 12 and a.qhat
    a.begin(prompts[:6])
    a.add_prompts(prompts[100:112])
    sent: dict[str, int] = defaultdict(int)

    def sample(requests):
        out = policy.generate(requests)
        for s in out:
            s.index += sent[s.prompt_id]
        for r in requests:
            sent[r.prompt.id] += r.k
        return out

    requests = a.propose()  # the calibration prompts' batches; the training prompts wait for the thresholds
    assert {r.prompt.id for r in requests} == {p.id for p in prompts[100:112]}
    a.observe(sample(requests[:5]))  # part of the calibration prompts have arrived
    state = json.loads(json.dumps(a.state_dict()))
    b = build_strategy(cfg)
    b.load_state_dict(state)
    assert b.state_dict() == state
    assert (b.qhat, b.cal_scores, b.delta, b.steps) == (a.qhat, a.cal_scores, a.delta, a.steps)
    samples = sample(requests[5:])
    b.observe([Sample(**vars(s)) for s in samples])
    a.observe(samples)
    assert a.fitted and b.fitted and a.qhat == b.qhat
    while not a.done():
        requests = a.propose()
        assert b.propose() == requests
        samples = sample(requests)
        b.observe([Sample(**vars(s)) for s in samples])
        a.observe(samples)
    assert b.done() and a.qhat == b.qhat and a.cal_scores == b.cal_scores
    assert [(g.prompt.id, g.rewards) for g in a.build()] == [(g.prompt.id, g.rewards) for g in b.build()]


def test_a_checkpoint_from_another_grid_is_refused():
    state = build_strategy(strategy_config(name="conformal")).state_dict()
    other = build_strategy(strategy_config(name="conformal", budget_grid="4/8"))
    with pytest.raises(ConfigError, match="budget_grid"):
        other.load_state_dict(state)


# -- planner, CLI, trainer --------------------------------------------------------------------------------------------
def test_monte_carlo_plan_matches_the_closed_form_at_qhat_one():
    cfg = strategy_config(name="conformal")
    for row in plan_monte_carlo(cfg, [0.1, 0.5], reps=3000, seed=4):
        zero, expected, unresolved = first_success_law(row.p, (2, 4, 8, 16, 32), [1.0] * 5)
        assert abs(row.zero_signal - zero) < 4 * row.stderr + 1e-9
        assert row.expected_samples == pytest.approx(expected, rel=0.05)
    # the law by hand at p = 0.5: stop at 2 unless the first two fail, then 4, 8, 16 (qhat 1: any success stops)
    zero, expected, unresolved = first_success_law(0.5, (2, 4, 8, 16, 32), [1.0] * 5)
    assert expected == pytest.approx(2 + 2 * 0.5**2 + 4 * 0.5**4 + 8 * 0.5**8 + 16 * 0.5**16)
    assert zero == pytest.approx(0.25 + 0.5**32) and unresolved == pytest.approx(0.5**32)


def test_closed_form_with_strict_thresholds():
    # qhat = 1, 0.5, 0.25 on 2/4/8: j=1 stops at 2, j=2 at 2, j=3..8 never (3/4, j/8 > 0.25 for j >= 3)
    p = 0.3
    zero, expected, unresolved = first_success_law(p, (2, 4, 8), [1.0, 0.5, 0.25])
    stop_early = p + (1 - p) * p
    assert unresolved == pytest.approx(1 - stop_early)
    assert expected == pytest.approx(2 * stop_early + 8 * (1 - stop_early))
    assert zero == pytest.approx(p * p + (1 - p) ** 8)


def test_plan_command(capsys):
    from reinforce_ada.cli import main

    assert main(["plan", "--strategy", "conformal", "--pass-rates", "0.1,0.5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["monte_carlo"] * 2
    assert rows[1]["expected_samples"] == pytest.approx(first_success_law(0.5, (2, 4, 8, 16, 32), [1.0] * 5)[1], 0.05)


def test_one_trainer_step_on_the_tiny_task(model_dir, tmp_path):
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    run = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 64, "eval_size": 4},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"name": "conformal", "budget_grid": "2/4", "calibration_prompts": 3},
        },
        "test",
    )
    tr = Trainer(run, tensorboard=False)
    m = tr.fit()
    assert tr.step == 1 and not run.streaming
    assert m["calibration_samples"] == 3 * 4 and m["calibration_size"] == 3
    assert m["samples_generated"] == m["samples_trained"] + 12
    assert m["prompts_at_budget_2"] + m["prompts_at_budget_4"] == m["prompts_trained"] == 4
    assert all(math.isfinite(m[f"qhat_{k}"]) for k in (2, 4))


# -- configuration ----------------------------------------------------------------------------------------------------
def test_defaults_are_the_packages():
    c = strategy_config(name="conformal")
    o = c.options
    assert (o.budget_grid, o.conformal_delta, o.delta_margin, o.split_delta, o.recalibrate_every) == (
        "2/4/8/16/32",
        None,
        0.05,
        False,
        50,
    )
    assert o.advantage == "group" and o.scale_std  # TRL's GRPO group baseline with std
    arm = parse_arm("conformal:budget_grid=4/8/16,max_samples=16,conformal_score=pass_rate")
    assert arm.options.budget_grid == "4/8/16" and arm.options.conformal_score == "pass_rate"


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"budget_grid": "2,4,8"}, "budget_grid"),
        ({"budget_grid": "0/2"}, "budget_grid"),
        ({"budget_grid": "2/2/4"}, "budget_grid"),
        ({"budget_grid": "two"}, "budget_grid"),
        ({"budget_grid": "64/128"}, "budget_grid"),  # nothing <= max_samples=32
        ({"conformal_score": "aps"}, "conformal_score"),
        ({"conformal_score": "entropy"}, "conformal_score"),
        ({"conformal_delta": 0.0}, "conformal_delta"),
        ({"conformal_delta": 1.0}, "conformal_delta"),
        ({"delta_margin": -0.1}, "delta_margin"),
        ({"recalibrate_every": -1}, "recalibrate_every"),
        ({"calibration_prompts": -1}, "calibration_prompts"),
    ],
)
def test_bad_input_names_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        strategy_config(name="conformal", **changes)
