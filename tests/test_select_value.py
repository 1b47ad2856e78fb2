"""`select=value` (issue 23): expected signal per generated token from the planner's law, over each candidate's
Beta posterior; closed forms, the choice, the predictor's prior, lengths, the trainer and the simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.value import candidate_values, value_choose
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.law import GRID
from reinforce_ada.sampling.memory import PassRateOracle, PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.plan import plan
from reinforce_ada.types import Prompt
from tests import test_allocators as allocators
from tests.helpers import table_of, train_config

RNG = np.random.default_rng(0)


def prompts(n: int, prefix: str = "q") -> list[Prompt]:
    return [Prompt(id=f"{prefix}{i}", text=f"question {prefix} {i}") for i in range(n)]


def source(pool: list[Prompt], start: int):
    """A prompt source handing out the pool in order from `start`, then nothing."""
    at = [start]

    def more(k: int) -> list[Prompt]:
        out = pool[at[0] : at[0] + k]
        at[0] += len(out)
        return out

    return more


def oracle_memory(rates: dict[str, float]) -> PromptMemory:
    mem = PromptMemory(make_options(Options, estimator="oracle"))
    mem.attach(oracle=PassRateOracle(lambda ps: np.array([rates[p.id] for p in ps])))
    return mem


def values(spec: str, cands: list[Prompt], mem: PromptMemory) -> np.ndarray:
    return candidate_values(table_of(parse_arm(spec)), cands, mem, RNG, 0.0)


# -- closed forms ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 4, 8])
def test_uniform_value_of_a_point_mass_is_signal_per_token(n):
    rates = {"a": 0.1, "b": 0.37, "c": 0.5, "d": 0.83, "e": 0.0, "f": 1.0, "g": 0.25}
    cands = [Prompt(id=i, text=i) for i in rates]
    oracle = oracle_memory(rates)
    sharp = PromptMemory(make_options(Options))  # the tracker with a Beta of strength 1e7 on the rate
    for pid, p in rates.items():
        sharp.tracker.counts[pid] = (p * 1e7, 1e7)
    for mem, tokens in ((oracle, 1.0), (sharp, 1.0), (oracle, 37.0)):
        for p in cands:
            if tokens != 1.0:
                mem.tokens[p.id] = tokens
        got = values(f"uniform:n={n},select=value", cands, mem)
        p = np.array(list(rates.values()))
        want = (1 - p**n - (1 - p) ** n) / (n * tokens)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)  # p = 0 under the tracker: Beta(1, 1e7 + 1)


@pytest.mark.parametrize(("a", "b"), [(1, 1), (3, 3), (0.5, 0.5), (0.02, 1.98), (2, 9), (40, 60), (300, 700)])
def test_uniform_value_of_a_wide_posterior_is_the_beta_moment(a, b):
    """E[1 - p^n - (1-p)^n] over Beta(a, b) is exact from the moments E[p^n] = prod_i (a + i) / (a + b + i)."""
    mem = PromptMemory(make_options(Options, prior_alpha=a, prior_beta=b))  # a never-seen prompt: the tracker's prior
    n = 4
    moment = np.prod([(a + i) / (a + b + i) for i in range(n)]) + np.prod([(b + i) / (a + b + i) for i in range(n)])
    got = values(f"uniform:n={n},select=value", prompts(1), mem)[0]
    assert got == pytest.approx((1 - moment) / n, abs=3e-4 / n)


@pytest.mark.parametrize("spec", ["seq:select=value", "seq:select=value,exit=positive", "seq:select=value,give_up=0.1"])
def test_seq_value_is_the_plans_signal_over_expected_samples(spec):
    cfg = parse_arm(spec)
    on_grid = [0.0, 64 / (GRID - 1), 0.25, 0.5, 400 / (GRID - 1), 1.0]  # grid points: exact
    off_grid = [0.1, 0.33, 0.71]  # between grid points: linear interpolation
    for ps, rtol in ((on_grid, 1e-5), (off_grid, 2e-3)):  # on the grid: only the oracle Beta's width
        rates = {f"x{i}": p for i, p in enumerate(ps)}
        got = values(spec, [Prompt(id=i, text=i) for i in rates], oracle_memory(rates))
        want = np.array([(1 - r.zero_signal) / r.expected_samples for r in plan(cfg, ps)])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-9)
    assert table_of(cfg).law == "plan:sequential"


def test_batch_and_monte_carlo_planners_fall_back_to_the_uniform_law():
    for spec in ("est:select=value,n=6", "knapsack:select=value,n=6"):
        table = table_of(parse_arm(spec))
        assert table.law == "uniform:n=6"
        np.testing.assert_allclose(table.signal, 1 - table.p**6 - (1 - table.p) ** 6)
        assert np.all(table.samples == 6)
    assert table_of(parse_arm("pilot_commit:select=value")).law == "plan:pilot"


# -- the choice ------------------------------------------------------------------------------------------------------
def test_selection_keeps_the_highest_values_ties_by_candidate_order():
    mem = PromptMemory(make_options(Options))
    cands = prompts(7)
    for p, k in zip(cands, [0, 2, 5, 8, 10, 3, 2], strict=True):
        mem.tracker.counts[p.id] = (k * 100.0, 1000.0)  # sharp beliefs at 0, .2, .5, .8, 1, .3, .2
    table = table_of(parse_arm("uniform:n=4,select=value"))
    chosen, all_values, kept = value_choose(cands, 2, mem, RNG, table, 0.0)
    assert [p.id for p in chosen] == ["q2", "q5"]  # 0.5 and 0.3
    assert sorted(kept) == sorted(np.sort(all_values)[-2:])
    chosen, _, _ = value_choose(cands, 3, mem, RNG, table, 0.0)
    assert [p.id for p in chosen] == ["q1", "q2", "q5"]  # q1 and q6 hold the same belief: the earlier one wins
    assert value_choose(cands[:2], 3, mem, RNG, table, 0.0)[0] == cands[:2]


def test_a_longer_answer_loses_to_an_equally_uncertain_shorter_one():
    mem = PromptMemory(make_options(Options))
    long, short = Prompt(id="long", text="a"), Prompt(id="short", text="b")
    mem.record(long, [True, False, True, False], tokens=[900, 1100, 1000, 1000])
    mem.record(short, [False, True, True, False], tokens=[90, 110, 100, 100])
    assert mem.posterior(long) == mem.posterior(short)
    table = table_of(parse_arm("uniform:n=4,select=value"))
    chosen, v, _ = value_choose([long, short], 1, mem, RNG, table, 0.0)
    assert chosen == [short] and v[0] == pytest.approx(v[1] / 10)


def test_both_ranks_never_seen_prompts_by_the_predictor():
    def level(i: int, lv: int, tag: str) -> Prompt:
        return Prompt(id=f"{tag}{lv}-{i}", text=f"{tag} item {i}", level=lv)

    cfg = parse_arm("uniform:n=4,select=value,estimator=both")
    mem, plain = PromptMemory(cfg.options), PromptMemory(cfg.replace(estimator="tracker").options)
    rng = np.random.default_rng(1)
    for i in range(200):  # level 0 is nearly always wrong, level 1 a coin flip
        lv = i % 2
        p = level(i, lv, "seen")
        for m in (mem, plain):
            m.record(p, list(rng.random(8) < (0.03 if lv == 0 else 0.5)))
    mem.new_step()
    fresh = [level(i, i % 2, "new") for i in range(20)]  # never seen; alternate hard, medium
    table = table_of(cfg)
    chosen, _, _ = value_choose(fresh, 10, mem, RNG, table, 0.0)
    assert {p.level for p in chosen} == {1}
    assert value_choose(fresh, 10, plain, RNG, table, 0.0)[0] == fresh[:10]  # the tracker alone: all Beta(1, 1)


def test_explore_draws_thompson_values_and_greedy_uses_no_randomness():
    mem = PromptMemory(make_options(Options))
    cands = prompts(40)
    table = table_of(parse_arm("uniform:n=4,select=value"))
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    greedy = candidate_values(table, cands, mem, rng, 0.0)
    assert rng.bit_generator.state == before and len(set(greedy.tolist())) == 1
    a = candidate_values(table, cands, mem, np.random.default_rng(3), 1.0)
    b = candidate_values(table, cands, mem, np.random.default_rng(3), 1.0)
    assert np.array_equal(a, b) and len(set(a.tolist())) == 40  # each candidate its own draw from Beta(1, 1)
    assert np.all(a <= (1 - 2 * 0.5**4) / 4 + 1e-12)  # no draw beats p = 0.5


# -- lengths in the memory -------------------------------------------------------------------------------------------
def test_length_ema_falls_back_to_the_mean_then_one_and_old_states_load():
    mem = PromptMemory(make_options(Options))
    a, b = Prompt(id="a", text="a"), Prompt(id="b", text="b")
    assert mem.tokens_per_sample(a) == 1.0  # no data: value is signal per sample
    mem.record(a, [True, False], tokens=[10, 30])
    assert mem.tokens_per_sample(a) == 20.0 and mem.tokens_per_sample(b) == 20.0
    mem.record(a, [True], tokens=[60])
    mem.record(b, [False], tokens=[0])  # no length known: ignored
    assert mem.tokens_per_sample(a) == pytest.approx(40.0)  # EMA 0.5: (20 + 60) / 2
    assert mem.tokens_per_sample(b) == pytest.approx(100 / 3)  # all samples: (10 + 30 + 60) / 3
    state = json.loads(json.dumps(mem.state_dict()))
    twin = PromptMemory(make_options(Options))
    twin.load_state_dict(state)
    assert twin.state_dict() == mem.state_dict() and twin.tokens_per_sample(b) == mem.tokens_per_sample(b)
    del state["tokens"], state["token_total"]  # a checkpoint from before lengths were kept
    old = PromptMemory(make_options(Options))
    old.load_state_dict(state)
    assert old.tokens_per_sample(a) == 1.0 and old.visits == mem.visits


def test_a_prompt_never_drawn_is_priced_by_its_level_then_by_every_sample():
    mem = PromptMemory(make_options(Options))
    short, long, unseen_long, other = (
        Prompt(id=i, text=i, level=lv) for i, lv in (("s", 1), ("l", 4), ("u", 4), ("o", 9))
    )
    mem.record(short, [True, True], tokens=[10, 10])
    mem.record(long, [True, False], tokens=[80, 120])
    assert mem.tokens_per_sample(unseen_long) == 100.0  # its level's mean, not every sample's (55)
    assert mem.tokens_per_sample(other) == 55.0 and mem.tokens_per_sample(Prompt(id="n", text="n")) == 55.0
    twin = PromptMemory(make_options(Options))
    twin.load_state_dict(json.loads(json.dumps(mem.state_dict())))
    assert twin.tokens_per_sample(unseen_long) == 100.0


# -- composed with samplers, checkpointed ----------------------------------------------------------------------------
def test_value_selects_near_half_prompts_over_steps_with_metrics():
    rates = [0.0] * 30 + [0.5] * 30 + [1.0] * 30
    pool, policy = allocators.frozen(rates, seed=6)
    order = PromptOrder(pool, 0)
    s = build_strategy(parse_arm("uniform:n=4,select=value,candidates=4,seed=3"))
    mid = edge = 0
    for step in range(20):
        b = collect(s, policy, order.take(8), more_prompts=lambda k: order.take(k, exclude=s.prompts))
        m = b.ledger.extra
        assert b.ledger.prompts == 8 and m["offered_prompts"] == 32 and m["unselected_prompts"] == 24
        assert m["value_selected"] >= m["value_offered"] > 0
        if step >= 8:
            hits = [rates[int(g.prompt.id[1:])] == 0.5 for g in b.groups]
            mid, edge = mid + sum(hits), edge + len(hits) - sum(hits)
    # a prompt seen at 0 or 1 scores below an unseen Beta(1, 1): edges are taken only when nothing better is offered
    assert mid / (mid + edge) > 0.6


@pytest.mark.parametrize(
    "spec",
    ["uniform:n=4,select=value,estimator=both", "seq:select=value", "est:select=value", "pilot_commit:select=value"],
)
def test_every_sampler_composes_and_round_trips_mid_step(spec):
    allocators.test_state_round_trip_mid_step_with_history(spec)
    rates = [0.05, 0.3, 0.6, 0.95] * 40
    for driver in ("round", "stream"):
        pool, policy = allocators.frozen(rates, seed=2)
        s = build_strategy(parse_arm(spec).replace(candidates=4))
        more = source(pool, 10)
        if driver == "round":
            b = collect(s, policy, pool[:10], more_prompts=more)
        else:
            b = collect_streaming(s, policy.streaming(16, seed=1), pool[:10], more_prompts=more)
        m = b.ledger.extra
        assert m["unselected_prompts"] == 3 * m["offered_prompts"] // 4 and m["value_selected"] >= m["value_offered"]
        if not spec.startswith("pilot_commit"):  # pilot_commit also trains fewer than it admits (deferred prompts)
            assert len(b.groups) == 10 and m["offered_prompts"] == 40
        assert s.memory.tokens and all(t > 1 for t in s.memory.tokens.values())  # the simulated lengths


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match="select_explore"):
        parse_arm("uniform:select=value,select_explore=-0.1")
    with pytest.raises(ConfigError, match="select_explore"):
        strategy_config(select="value", select_explore=1.5)
    with pytest.raises(ConfigError, match="candidates"):
        parse_arm("seq:select=value,candidates=0")
    with pytest.raises(ConfigError, match="select='value' contradicts name='mopps'"):
        parse_arm("mopps:select=value")
    with pytest.raises(ConfigError, match="max_samples=2048 is past the planner's limit"):  # the exact law is refused
        build_strategy(parse_arm("seq:select=value,max_samples=2048"))


# -- the simulator and the trainer -----------------------------------------------------------------------------------
def test_simulate_accepts_value_selection():
    from reinforce_ada.simulation.simulate import simulate

    arms = [
        "uniform:n=4,select=value",
        "uniform:n=4,select=value,estimator=both",
        "seq:select=value,select_explore=0.5",
    ]
    res = simulate(arms, steps=3, seeds=1, batch_size=8, pool_size=200)
    assert len(res["arms"]) == 3
    for arm in res["arms"].values():
        run = arm["runs"][0]
        assert len(run["pass_rate"]) == 4 and run["skipped_per_step"][0] == 8 * 15  # 16 x 8 offered, 8 kept
    oracle = simulate(["uniform:n=4,select=value,estimator=oracle"], steps=2, seeds=1, batch_size=8, pool_size=200)
    (summary,) = (arm["summary"] for arm in oracle["arms"].values())
    assert summary["zero_signal_share"] < 0.5  # the exact rates: prompts near 1/2 are chosen


def test_a_few_trainer_steps_with_value_selection(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer

    strategy = parse_arm("uniform:n=4,select=value,estimator=both,candidates=4")
    tr = Trainer(train_config(model_dir, tmp_path / "run", strategy), tensorboard=False)
    try:
        steps = [tr.train_step() for _ in range(2)]
    finally:
        tr.close()
    for m in steps:
        assert m["offered_prompts"] == 16 and m["unselected_prompts"] == 12
        assert m["value_selected"] >= m["value_offered"] >= 0
    assert len(tr.strategy.prompts) == 4 and tr.strategy.memory.tokens  # real completion lengths remembered
    assert all(1 <= t <= 4 for t in tr.strategy.memory.tokens.values())  # max_new_tokens = 4


def test_one_trainer_step_with_the_oracle_keeps_the_most_signal_per_token(tmp_path):
    """With exact rates and n fixed, the kept prompts are those of highest 1 - p^4 - (1-p)^4 among 16 x 4 candidates,
    read in one batched oracle call (the shipped warm-started model on the arithmetic task)."""
    from reinforce_ada.training.trainer import Trainer
    from reinforce_ada.training.warm_start import SHIPPED_DIR

    strategy = parse_arm("uniform:n=4,select=value,estimator=oracle")
    cfg = train_config(
        SHIPPED_DIR,
        tmp_path / "run",
        strategy,
        task={"train_size": 256, "eval_size": 4},
        generation={"max_new_tokens": 8},
        run={"steps": 1},
    )
    trainer = Trainer(cfg, tensorboard=False)
    calls: list[tuple[list[str], np.ndarray]] = []
    exact = trainer.oracle._rates

    def recording(ps):
        out = exact(ps)
        calls.append(([p.id for p in ps], out))
        return out

    trainer.oracle._rates = recording
    try:
        m = trainer.train_step()
    finally:
        trainer.close()
    assert len(calls) == 1 and len(calls[0][0]) == 64  # every candidate's rate in one batched call
    signal = {i: 1 - r**4 - (1 - r) ** 4 for i, r in zip(calls[0][0], calls[0][1].tolist(), strict=True)}
    kept = list(trainer.strategy.prompts)
    assert max(signal.values()) - min(signal.values()) > 0.1  # the candidates differ: the choice is a real one
    assert len(kept) == 4 and min(signal[i] for i in kept) >= max(s for i, s in signal.items() if i not in kept) - 1e-6
    assert m["value_selected"] >= m["value_offered"]
