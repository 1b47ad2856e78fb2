"""Strategies: exit rules, downsampling, caps, budgets, state round-trips, bad configuration."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import STRATEGIES, allocate, build_strategy, downsample
from reinforce_ada.sampling.strategies.seq import give_up_point, resolve_chance
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt, Sample


def pool_of(rewards: list[float]) -> list[Sample]:
    return [Sample("x", reward=r, index=i) for i, r in enumerate(rewards)]


def frozen_engine(rates: list[float], seed: int = 0) -> tuple[list[Prompt], SimulatedPolicy]:
    prompts = [Prompt(id=f"p{i}", text="") for i in range(len(rates))]
    return prompts, SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=seed))


def test_downsample_balanced_and_fill_from_other_side():
    rng = np.random.default_rng(0)
    kept = downsample(pool_of([1, 0, 0, 0, 1, 0, 0, 0]), 4, threshold=0.5, selection="earliest", rng=rng)
    assert [s.index for s in kept] == [0, 1, 2, 4]
    one_pos = downsample(pool_of([0] * 31 + [1]), 4, threshold=0.5, selection="random", rng=rng)
    assert sorted(s.reward for s in one_pos) == [0, 0, 0, 1]
    all_neg = downsample(pool_of([0] * 8), 4, threshold=0.5, selection="random", rng=rng)
    assert len(all_neg) == 4 and all(s.reward == 0 for s in all_neg)
    short = downsample(pool_of([1, 0]), 4, threshold=0.5, selection="random", rng=rng)
    assert len(short) == 2  # never invents samples


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.3, 0.6, 1.0]), min_size=1, max_size=40),
    st.integers(1, 12),
    st.sampled_from(["random", "earliest"]),
)
def test_downsample_properties(rewards, n, selection):
    pool = pool_of(rewards)
    kept = downsample(pool, n, threshold=0.5, selection=selection, rng=np.random.default_rng(1))
    assert len(kept) == min(n, len(pool))
    assert len({id(s) for s in kept}) == len(kept) and all(any(s is p for p in pool) for s in kept)
    n_pos = sum(r > 0.5 for r in rewards)
    kept_pos = sum(s.reward > 0.5 for s in kept)
    k = len(kept)
    # as balanced as the pool allows: n//2 positives when there are enough of both
    assert kept_pos == min(n_pos, max(k // 2, k - (len(rewards) - n_pos)))
    assert [s.index for s in kept] == sorted(s.index for s in kept)


def test_seq_balanced_retires_mixed_prompt_after_one_round():
    prompts, engine = frozen_engine([0.5, 0.0, 1.0])
    batch = collect(build_strategy(strategy_config()), engine, prompts)
    led = batch.ledger
    assert led.active_prompts_per_round[0] == 2  # the p=0 and p=1 prompts cannot retire
    assert led.rounds == 4 and led.unresolved_prompts == 2
    sizes = {g.prompt.id: len(g.pool_rewards) for g in batch.groups}
    assert sizes["p1"] == sizes["p2"] == 32  # capped at max_samples
    assert all(len(g.samples) == 4 for g in batch.groups)
    assert led.zero_adv_prompts == 2 and led.samples_trained == 12


def test_seq_unresolved_drop_excludes_capped_prompts():
    prompts, engine = frozen_engine([0.5, 0.0])
    batch = collect(build_strategy(strategy_config(unresolved="drop")), engine, prompts)
    assert [g.prompt.id for g in batch.groups] == ["p0"]
    assert batch.ledger.dropped_prompts == 1 and batch.ledger.no_signal_prompt_share == 0.5


def test_seq_cap_not_multiple_of_round():
    prompts, engine = frozen_engine([0.0])
    batch = collect(build_strategy(strategy_config(samples_per_round=5, max_samples=12)), engine, prompts)
    assert len(batch.groups[0].pool_rewards) == 12 and batch.ledger.rounds == 3


def test_uniform_and_dynamic():
    prompts, engine = frozen_engine([0.5, 0.0, 1.0, 0.5])
    b = collect(build_strategy(strategy_config(name="uniform", n=6)), engine, prompts)
    assert b.ledger.samples_generated == 24 and b.ledger.rounds == 1

    more = [Prompt(id=f"m{i}", text="") for i in range(8)]
    pool = prompts + more
    engine = SimulatedPolicy(pool, [0.5, 0.0, 1.0, 0.5] + [0.5] * 8, SimConfig(lr=0.0))
    stream = iter(more)
    cfg = strategy_config(name="dynamic", n=8, max_gen_batches=3)
    b = collect(build_strategy(cfg), engine, prompts, more_prompts=lambda k: [next(stream) for _ in range(k)])
    assert b.ledger.extra["batch_filled"] and len(b.groups) == 4
    assert all(np.var(g.rewards) > 0 for g in b.groups)
    assert b.ledger.extra["gen_batches"] == 2 and b.ledger.dropped_prompts == 2


def test_dynamic_reports_unfilled_batch():
    prompts, engine = frozen_engine([0.0, 1.0, 0.0, 1.0])
    b = collect(build_strategy(strategy_config(name="dynamic", max_gen_batches=2)), engine, prompts)
    assert not b.ledger.extra["batch_filled"] and b.groups == []  # no refill source: trains on what it has


def test_dynamic_variance_test_accepts_float_rewards():
    strat = build_strategy(strategy_config(name="dynamic", n=2))
    strat.begin([Prompt(id="a", text="")])
    assert [(r.prompt.id, r.k) for r in strat.propose()] == [("a", 2)]
    strat.observe([Sample("a", reward=0.3, index=0), Sample("a", reward=0.4, index=1)])
    assert strat.kept == ["a"]  # 0.3 vs 0.4 has variance even though both are "wrong" at threshold 0.5


@pytest.mark.parametrize("budget", [0, 17, 64, 100, 1000])
def test_allocate_hits_budget_within_clips(budget):
    w = np.array([1.0, 2.0, 5.0, 0.5, 10.0, 3.0, 3.0, 1.0])
    n = allocate(w, budget, 2, 20)
    assert n.min() >= 2 and n.max() <= 20
    assert n.sum() == min(max(budget, 2 * 8), 20 * 8)
    assert np.all(np.diff(n[np.argsort(w)]) >= 0)  # monotone in the weight


def test_est_allocates_more_to_hard_prompts_and_tracks():
    prompts, engine = frozen_engine([0.02, 0.5, 0.95])
    strat = build_strategy(strategy_config(name="est", budget=30, min_samples=2, max_samples=20))
    b1 = collect(strat, engine, prompts)
    assert b1.ledger.samples_generated == 30  # first visit: prior 0.5 everywhere -> equal split
    for _ in range(5):
        b = collect(strat, engine, prompts)
    sizes = {g.prompt.id: len(g.pool_rewards) for g in b.groups}
    assert sizes["p0"] > sizes["p1"] > sizes["p2"] and sum(sizes.values()) == 30
    w = {g.prompt.id: g.weight for g in b.groups}
    assert w["p0"] > w["p2"]
    assert strat.tracker.estimate("p0") < strat.tracker.estimate("p2")


def test_est_predictor_hook_and_bad_predictor():
    prompts, engine = frozen_engine([0.1, 0.9])
    strat = build_strategy(
        strategy_config(name="est", budget=20, min_samples=1), predictor=lambda p: 0.01 if p.id == "p0" else 0.99
    )
    b = collect(strat, engine, prompts)
    assert len(b.groups[0].pool_rewards) > len(b.groups[1].pool_rewards)
    bad = build_strategy(strategy_config(name="est"), predictor=lambda p: 1.5)
    with pytest.raises(ValueError, match="p0"):
        collect(bad, engine, prompts)


def test_tracker_closed_form():
    strat = build_strategy(strategy_config(name="est", prior_alpha=2, prior_beta=3, decay=0.5))
    t = strat.tracker
    assert t.estimate("new") == pytest.approx(2 / 5)
    t.update("a", 3, 4)
    t.update("a", 1, 4)
    assert t.estimate("a") == pytest.approx((0.5 * 3 + 1 + 2) / (0.5 * 4 + 4 + 5))
    t.update("z", 0, 10)
    assert t.estimate("z") > 0  # never 0


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_state_round_trip_mid_step(name):
    prompts, engine = frozen_engine([0.3, 0.6, 0.05, 0.9], seed=3)
    cfg = strategy_config(name=name, seed=5)
    a = build_strategy(cfg)
    collect(a, engine, prompts)  # let the est tracker / rng move
    sent = Counter()

    def sample(requests):  # what a driver does: generate, then number each sample by per-prompt submission order
        out = engine.generate(requests)
        for s in out:
            s.index += sent[s.prompt_id]
        sent.update({r.prompt.id: r.k for r in requests})
        return out

    a.begin(prompts)
    a.observe(sample(a.propose()))
    state = a.state_dict()
    b = build_strategy(cfg)
    b.load_state_dict(state)
    assert b.state_dict() == state
    import json

    assert json.loads(json.dumps(state)) == state  # checkpointable as JSON
    while not a.done():
        if a.wanted_prompts():  # no prompt source here: the strategy is told it is exhausted
            a.add_prompts([])
            b.add_prompts([])
            continue
        requests = a.propose()
        assert b.propose() == requests
        s = sample(requests)
        b.observe([Sample(**vars(x)) for x in s])
        a.observe(s)
    assert b.done()
    ga, gb = a.build(), b.build()
    assert [(g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in ga] == [
        (g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in gb
    ]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"k_pos": 40}, "k_pos"),
        ({"n": 64}, "n=64"),
        ({"samples_per_round": 0}, "samples_per_round"),
        ({"min_samples": 40}, "min_samples"),
        ({"budget": -1}, "budget"),
        ({"name": "adaptive"}, "name"),
        ({"exit": "pos"}, "exit"),
        ({"allocation": "sqrt"}, "allocation"),
        ({"decay": 0.0}, "decay"),
        ({"objective": "exp"}, "objective"),
        ({"selection": "first"}, "selection"),
    ],
)
def test_bad_config_names_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        strategy_config(**changes)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"n": 2.0}, "n=2.0 is not of type int (it is a Python float); write a whole number"),
        ({"n": True}, "n=True is not of type int (it is a Python bool)"),
        ({"n": "1"}, "n='1' is not of type int (it is a Python str)"),
        ({"decay": "0.5"}, "decay='0.5' is not of type float (it is a Python str)"),
        ({"priority_eps": "0.1"}, "priority_eps='0.1' is not of type float"),
        ({"scale_std": 1}, "scale_std=1 is not of type bool (it is a Python int)"),
        ({"select": None}, "select=None is not valid; expected str"),
    ],
)
def test_a_python_value_of_the_wrong_type_is_refused_before_it_reaches_a_step(changes, says):
    with pytest.raises(ConfigError) as e:  # a TypeError inside collect() used to be the first word of it
        strategy_config("spo", **changes)
    assert says in str(e.value)
    assert strategy_config("spo", decay=1, n=np.int64(2)).options.n == 2  # an int is a float; numpy's ints are ints


def test_an_options_class_written_without_string_annotations_is_type_checked_by_its_typing_objects():
    import dataclasses
    import typing

    from reinforce_ada.sampling.options import Options, type_name

    assert type_name(typing.Optional[int]) == "int | None" and type_name(int | None) == "int | None"  # noqa: UP045
    mine = dataclasses.make_dataclass(
        "Mine",
        [("k", typing.Optional[int], dataclasses.field(default=None))],  # noqa: UP045
        bases=(Options,),
        frozen=True,
    )
    assert mine().k is None and mine(k=3).k == 3  # a user's file without `from __future__ import annotations`
    with pytest.raises(ConfigError, match=r"k='3' is not of type int \| None"):
        mine(k="3")


def test_unknown_strategy_lists_valid_names():
    with pytest.raises(ConfigError, match="uniform"):
        strategy_config(name="grpo")


def test_collect_is_deterministic_under_seed():
    def run():
        prompts, engine = frozen_engine([0.1, 0.3, 0.7], seed=9)
        b = collect(build_strategy(strategy_config(seed=2)), engine, prompts)
        metrics = {k: v for k, v in b.ledger.as_metrics().items() if not k.startswith("time_")}
        return [(g.prompt.id, [s.index for s in g.samples]) for g in b.groups], metrics

    assert run() == run()


def test_auto_resolves_to_the_recommended_strategy():
    """`auto` builds the strategy named by AUTO, with its defaults and its exact plan; the config resolves the name at
    once, so config.toml and a resumed run name what ran."""
    from reinforce_ada.sampling.configure import parse_arm, strategy_config
    from reinforce_ada.sampling.strategies import AUTO, strategy_class
    from reinforce_ada.simulation.plan import plan

    assert AUTO in STRATEGIES and AUTO != "auto" and "auto" in STRATEGIES  # a CLI choice
    assert strategy_class("auto") is strategy_class(AUTO)
    auto, named = strategy_config(name="auto"), strategy_config(name=AUTO)
    assert auto == named and auto.name == AUTO
    assert parse_arm("auto:n=8") == parse_arm(f"{AUTO}:n=8")
    assert type(build_strategy(auto)) is type(build_strategy(named))
    rates = [0.0, 0.1, 0.5, 0.9]
    assert [r.zero_signal for r in plan(auto, rates)] == [r.zero_signal for r in plan(named, rates)]


def test_an_option_of_another_strategy_is_refused_naming_who_has_it(capsys):
    from reinforce_ada.cli import main
    from reinforce_ada.errors import ConfigError
    from reinforce_ada.sampling.configure import parse_arm, strategy_config

    with pytest.raises(SystemExit) as e:
        main(["plan", "--strategy", "uniform", "--k-pos", "2", "--pass-rates", "0.5"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "k_pos (an option of seq): not an option of strategy 'uniform'" in err
    with pytest.raises(ConfigError, match="budget .an option of est, knapsack.: not an option of strategy 'seq'"):
        strategy_config("seq", budget=64)
    with pytest.raises(ConfigError, match="arm 'uniform:exit=positive': exit .an option of seq"):
        parse_arm("uniform:exit=positive")
    from reinforce_ada.sampling.configure import config_from_table

    with pytest.raises(ConfigError, match=r"c.toml: \[strategy\] decy \(did you mean decay\?\): not an option"):
        config_from_table({"decy": 0.5}, strategy_config("spo"), "c.toml")  # a typo in TOML, as the CLI's flags say
    # switching strategy keeps what the user set that the new one also has, and takes the rest from its defaults
    seq = strategy_config("seq", k_pos=2, estimator="both")
    uni = parse_arm("uniform:n=8", seq)
    assert (uni.options.estimator, uni.options.n, uni.options.advantage, uni.options.scale_std) == (
        "both",
        8,
        "group",
        True,
    )


# --- (was tests/test_give_up.py) --------------------------------------------------------------------------------------
# When Seq's give-up rule can act (issue 21, item 7): the docstring's numbers, and that it changes the run exactly
# where `give_up_point` says it can.


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


@pytest.mark.parametrize("arm", ["spo", "uniform:n=2,length_cap=relative,cap_ratio=1.2", "uniform:select=mopps"])
def test_a_config_whose_options_compose_features_pickles_to_the_same_class_and_values(arm):
    """Worker processes (`compare --workers 2`) receive jobs by pickle; a class composed with features is made at run
    time, so it pickles by its base, its features and its values (before, pickle could not find it by name)."""
    import pickle

    from reinforce_ada.sampling.configure import parse_arm

    cfg = parse_arm(arm)
    back = pickle.loads(pickle.dumps(cfg))
    assert type(back.options) is type(cfg.options) and back == cfg and back.options.features
