"""Streaming sampling: equivalence with round mode where the maths says so, the keep/cancel difference, accounting,
caps, determinism and simulated makespan."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.makespan import makespan_study
from reinforce_ada.simulation.plan import plan
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.simulation.stream import Latency, RoundEngine, SimulatedStream
from reinforce_ada.types import Prompt, Request

REPS = 1500  # prompts per pass rate: Monte-Carlo error bars below are 4 standard errors


def frozen(rates: list[float], seed: int = 0) -> tuple[list[Prompt], SimulatedPolicy]:
    prompts = [Prompt(id=f"p{i}", text="") for i in range(len(rates))]
    return prompts, SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=seed))


def stream_step(cfg: StrategyConfig, rates: list[float], *, slots: int = 256, seed: int = 0, latency=None, **opts):
    prompts, policy = frozen(rates, seed)
    engine = policy.streaming(slots, latency, seed=seed)
    return collect_streaming(build_strategy(cfg), engine, prompts, **opts), engine


def assert_within(x: float, exact: float, se: float, what: str) -> None:
    assert abs(x - exact) <= 4 * se + 1e-12, f"{what}: {x:.4f} vs exact {exact:.4f} (4 se = {4 * se:.4f})"


@pytest.mark.slow
@pytest.mark.parametrize("exit", ["balanced", "positive"])
@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("p", [0.05, 0.3])
def test_seq_cancel_matches_plan(exit, prefetch, p):
    cfg = strategy_config(exit=exit)
    exact = plan(cfg, [p])[0]
    batch, _ = stream_step(cfg, [p] * REPS, prefetch=prefetch, in_flight="cancel")
    sizes = np.array([len(g.pool_rewards) for g in batch.groups])
    assert_within(sizes.mean(), exact.expected_samples, sizes.std() / np.sqrt(REPS), "pool size")
    u = batch.ledger.unresolved_prompts / REPS
    assert_within(u, exact.unresolved, np.sqrt(exact.unresolved * (1 - exact.unresolved) / REPS), "unresolved")
    z = batch.ledger.no_signal_prompt_share
    assert_within(z, exact.zero_signal, np.sqrt(exact.zero_signal * (1 - exact.zero_signal) / REPS), "zero signal")


@pytest.mark.slow
def test_seq_pool_size_distribution_matches_round_mode():
    cfg, rates = strategy_config(), [0.1] * REPS
    prompts, policy = frozen(rates, seed=1)
    rnd = Counter(len(g.pool_rewards) for g in collect(build_strategy(cfg), policy, prompts).groups)
    batch, _ = stream_step(cfg, rates, seed=2, prefetch=True)
    st = Counter(len(g.pool_rewards) for g in batch.groups)
    assert set(st) <= {8, 16, 24, 32}
    for size in (8, 16, 24, 32):
        a, b = rnd[size] / REPS, st[size] / REPS
        se = np.sqrt((a * (1 - a) + b * (1 - b)) / REPS)
        assert_within(b, a, se, f"share of pools of size {size}")


@pytest.mark.slow
def test_keep_grows_pools_but_not_exit_decisions():
    cfg = strategy_config()
    exact = plan(cfg, [0.3])[0]
    keep, _ = stream_step(cfg, [0.3] * REPS, prefetch=True, in_flight="keep")
    cancel, _ = stream_step(cfg, [0.3] * REPS, prefetch=True, in_flight="cancel")
    k = np.array([len(g.pool_rewards) for g in keep.groups])
    c = np.array([len(g.pool_rewards) for g in cancel.groups])
    # measured: ~17.3 vs ~10.3 -- a retiring prompt has M in flight, of which ~M-1 are not yet checked
    assert 5.0 < k.mean() - c.mean() < 8.0
    assert k.max() <= cfg.options.max_samples
    u = keep.ledger.unresolved_prompts / REPS
    assert_within(u, exact.unresolved, np.sqrt(max(exact.unresolved, 1e-3) / REPS), "keep unresolved")
    assert all(sum(r > 0.5 for r in g.rewards) == 2 for g in keep.groups if g.resolved)  # still n/2 + n/2
    # a positive exit can gain a late wrong answer: all-correct pools (no signal) become rarer
    pos = strategy_config(exit="positive")
    keep_pos, _ = stream_step(pos, [0.7] * REPS, prefetch=True, in_flight="keep")
    assert keep_pos.ledger.no_signal_prompt_share < 0.5 * plan(pos, [0.7])[0].zero_signal


@pytest.mark.slow
def test_keep_moves_baseline_toward_pass_rate():
    """Round mode's pool mean is biased by the stopping rule; late samples are independent of the stop."""
    cfg, p = strategy_config(), 0.05
    bias = {}
    for mode in ("cancel", "keep"):
        batch, _ = stream_step(cfg, [p] * REPS, seed=3, prefetch=True, in_flight=mode)
        bias[mode] = np.mean([np.mean(g.pool_rewards) for g in batch.groups]) - p
    assert bias["cancel"] > 0.01 and 0 < bias["keep"] < bias["cancel"]


@pytest.mark.parametrize(
    ("changes", "opts"),
    [
        ({}, {}),
        ({"samples_per_round": 5, "max_samples": 12}, {"prefetch": True}),
        ({"samples_per_round": 5, "max_samples": 12}, {"prefetch": True, "in_flight": "keep"}),
        ({"exit": "positive"}, {"prefetch": True}),
    ],
)
def test_caps_indices_and_accounting(changes, opts):
    cfg = strategy_config(**changes)
    rates = list(np.random.default_rng(0).uniform(0, 0.6, 300)) + [0.0, 1.0]
    prompts, policy = frozen(rates)
    engine = policy.streaming(16, seed=1)
    sent = Counter()
    submit = engine.submit

    def counting_submit(requests):
        sent.update({r.prompt.id: r.k for r in requests})
        return submit(requests)

    engine.submit = counting_submit
    batch = collect_streaming(build_strategy(cfg), engine, prompts, **opts)
    led = batch.ledger
    assert max(sent.values()) <= cfg.options.max_samples
    for g in batch.groups:
        idx = [s.index for s in g.samples]
        assert idx == sorted(idx) and len(set(idx)) == len(idx)
        assert (
            len(g.samples) == min(cfg.options.n, len(g.pool_rewards)) and len(g.pool_rewards) <= cfg.options.max_samples
        )
    assert sorted(g.prompt.id for g in batch.groups) == sorted(p.id for p in prompts)
    assert led.samples_generated + led.extra["cancelled_samples"] == sum(sent.values()) == engine.next_ticket
    pooled = sum(len(g.pool_rewards) for g in batch.groups)
    assert pooled + led.extra["discarded_samples"] == led.samples_generated
    assert engine.idle()


def test_pool_indices_are_contiguous_and_rounds_are_batches():
    cfg = strategy_config(samples_per_round=5, max_samples=12)
    for opts in ({"prefetch": True}, {"prefetch": True, "in_flight": "keep"}, {}):
        prompts, policy = frozen(list(np.linspace(0, 1, 50)))
        strategy = build_strategy(cfg)
        collect_streaming(strategy, policy.streaming(8, seed=2), prompts, **opts)
        for pool in strategy.pools.values():
            assert [s.index for s in pool] == list(range(len(pool)))
            assert [s.round for s in pool] == [s.index // 5 for s in pool]


def test_cancel_counts():
    cfg = strategy_config()
    plain, _ = stream_step(cfg, [0.5] * 200, slots=64)
    assert plain.ledger.extra["cancelled_samples"] == plain.ledger.extra["discarded_samples"] == 0
    pf, engine = stream_step(cfg, [0.5] * 200, slots=64, prefetch=True)
    led = pf.ledger
    # p = 0.5: almost every prompt retires after batch 1 with its whole prefetched batch 2 submitted
    assert led.extra["cancelled_samples"] + led.extra["discarded_samples"] == engine.next_ticket - sum(
        len(g.pool_rewards) for g in pf.groups
    )
    assert led.extra["cancelled_samples"] > 0.8 * 200 * 8 * 0.9
    keep, _ = stream_step(cfg, [0.5] * 200, slots=64, prefetch=True, in_flight="keep")
    assert keep.ledger.extra["cancelled_samples"] == keep.ledger.extra["discarded_samples"] == 0


def test_deterministic_under_seed():
    def run():
        b, engine = stream_step(strategy_config(seed=4), list(np.linspace(0.01, 0.6, 80)), slots=16, prefetch=True)
        m = {k: v for k, v in b.ledger.as_metrics().items() if not k.startswith("time_")}
        return [(g.prompt.id, g.rewards, g.pool_rewards) for g in b.groups], m, engine.clock

    assert run() == run()


@pytest.mark.parametrize("name", ["uniform", "est"])
def test_one_batch_strategies_identical_in_both_modes(name):
    rates = list(np.linspace(0.02, 0.9, 40))
    cfg = strategy_config(name=name, seed=1)
    prompts, policy = frozen(rates, seed=5)
    rnd = collect(build_strategy(cfg), policy, prompts)
    st, _ = stream_step(cfg, rates, seed=5, slots=7, latency=Latency(sigma=None))  # the policy's own token counts
    assert [(g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in rnd.groups] == [
        (g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in st.groups
    ]
    assert all(np.array_equal(a, b) for a, b in zip(rnd.advantages, st.advantages, strict=True))
    drop = ("time_generate_s",)
    assert {k: v for k, v in rnd.ledger.as_metrics().items() if k not in drop} == {
        k: v for k, v in st.ledger.as_metrics().items() if k not in drop + ("cancelled_samples", "discarded_samples")
    }


def test_round_engine_is_round_mode():
    prompts, policy = frozen([0.1, 0.5, 0.9], seed=2)
    a = collect(build_strategy(strategy_config()), policy, prompts)
    prompts, policy = frozen([0.1, 0.5, 0.9], seed=2)
    engine = RoundEngine(policy.streaming(4))
    b = collect(build_strategy(strategy_config()), engine, prompts)
    assert [g.pool_rewards for g in a.groups] == [g.pool_rewards for g in b.groups]
    assert engine.clock > 0


def test_dynamic_refills_early_with_round_semantics():
    rates = [0.5, 0.0, 1.0, 0.5] + [0.5] * 8
    prompts = [Prompt(id=f"p{i}", text="") for i in range(12)]
    policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0))
    stream = iter(prompts[4:])
    cfg = strategy_config(name="dynamic", n=8, max_gen_batches=3)
    b = collect_streaming(
        build_strategy(cfg), policy.streaming(8), prompts[:4], more_prompts=lambda k: [next(stream) for _ in range(k)]
    )
    assert b.ledger.extra["batch_filled"] and len(b.groups) == 4
    assert all(np.var(g.rewards) > 0 for g in b.groups)
    assert b.ledger.extra["gen_batches"] == 2 and b.ledger.dropped_prompts == 2
    assert b.ledger.rounds == 2
    kept = [g.prompt.id for g in b.groups]
    assert kept == sorted(kept, key=lambda i: int(i[1:]))  # trimmed in prompt order, as round mode


def test_bad_in_flight_and_busy_engine():
    prompts, policy = frozen([0.5])
    with pytest.raises(ConfigError, match="in_flight"):
        collect_streaming(build_strategy(strategy_config()), policy.streaming(2), prompts, in_flight="drop")
    engine = policy.streaming(2)
    engine.submit([Request(prompts[0], 1)])
    with pytest.raises(RuntimeError, match="drain"):
        collect_streaming(build_strategy(strategy_config()), engine, prompts)


def test_streaming_makespan_beats_round_mode():
    arms = {"grpo": (strategy_config(name="uniform"), {}), "seq": (strategy_config(), {})}
    r = makespan_study(arms, prompts_per_step=32, slots=32, steps=5, latency=Latency(sigma=0.8), pool_size=400)
    assert r["grpo/stream"]["makespan"] == r["grpo/round"]["makespan"]  # one batch: same draws, same schedule
    assert r["seq/stream"]["makespan"] < 0.95 * r["seq/round"]["makespan"]
    assert r["seq/stream"]["utilisation"] > r["seq/round"]["utilisation"]


class SlowWhenCorrect:
    """A policy whose correct answers take 10x longer to decode: arrival order is then not independent of reward."""

    def __init__(self, policy: SimulatedPolicy):
        self.policy = policy

    def generate(self, requests):
        samples = self.policy.generate(requests)
        for s in samples:
            s.num_tokens *= 10 if s.reward else 1
        return samples


@pytest.mark.slow
def test_checks_follow_submission_order_when_latency_depends_on_reward():
    cfg, p = strategy_config(), 0.3
    prompts, policy = frozen([p] * REPS, seed=6)
    engine = SimulatedStream(SlowWhenCorrect(policy), 64, Latency(sigma=None), seed=6)
    batch = collect_streaming(build_strategy(cfg), engine, prompts, prefetch=True)
    exact = plan(cfg, [p])[0]
    sizes = np.array([len(g.pool_rewards) for g in batch.groups])
    assert_within(sizes.mean(), exact.expected_samples, sizes.std() / np.sqrt(REPS), "pool size")
    # the pool mean is the same statistic as round mode's (checking the first M arrivals would skew it low)
    pool_mean = np.mean([np.mean(g.pool_rewards) for g in batch.groups])
    rnd = collect(build_strategy(cfg), frozen([p] * REPS, seed=7)[1], prompts)
    ref = [np.mean(g.pool_rewards) for g in rnd.groups]
    assert_within(pool_mean, float(np.mean(ref)), np.std(ref) * np.sqrt(2 / REPS), "pool mean")
