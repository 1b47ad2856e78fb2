"""`bench.costmodel`: the memory-bound GPU formula in closed form, its monotonicity, cumulative seconds at the
evaluated steps, clear errors; and a real `run_job` record carries every series the models read."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reinforce_ada.bench.costmodel import (
    GPU_SERIES,
    GpuCost,
    cpu_step_seconds,
    cumulative,
    gpu_record_seconds,
    gpu_step_seconds,
)


def test_both_drivers_record_the_longest_completion_and_trained_tokens():
    from reinforce_ada.sampling.configure import strategy_config
    from reinforce_ada.sampling.rounds import collect
    from reinforce_ada.sampling.strategies import build_strategy
    from reinforce_ada.sampling.streaming import collect_streaming
    from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
    from reinforce_ada.simulation.stream import Latency
    from reinforce_ada.types import Prompt

    rates = list(np.linspace(0.05, 0.9, 12))
    prompts = [Prompt(id=f"p{i}", text="") for i in range(len(rates))]
    policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=3))
    seen: list = []

    class Recording:  # the round driver's engine, keeping every sample it returns
        def generate(self, requests):
            out = policy.generate(requests)
            seen.extend(out)
            return out

    rnd = collect(build_strategy(strategy_config(seed=1)), Recording(), prompts).ledger
    assert rnd.rounds >= 2 and rnd.max_completion_tokens == max(s.num_tokens for s in seen) > 0
    assert rnd.tokens_generated == sum(s.num_tokens for s in seen)
    assert len(rnd.samples_per_round) == rnd.rounds and sum(rnd.samples_per_round) == rnd.samples_generated
    assert rnd.samples_per_round[0] == 8 * len(prompts)  # every prompt's first batch (M = 8) is round 0
    stream = policy.streaming(8, Latency(mean_tokens=50, sigma=1.0), seed=2)
    polled: list = []
    poll = stream.poll
    stream.poll = lambda: polled.extend(out := poll()) or out
    batch = collect_streaming(build_strategy(strategy_config(seed=1)), stream, prompts)
    led = batch.ledger
    assert led.max_completion_tokens == max(s.num_tokens for s in polled)
    assert led.tokens_trained == sum(s.num_tokens for g in batch.groups for s in g.samples) > 0
    assert led.as_metrics()["max_completion_tokens"] == led.max_completion_tokens
    assert len(led.samples_per_round) == led.rounds and sum(led.samples_per_round) <= led.samples_generated


C = GpuCost(token_time_s=0.01, slots=8, round_overhead_s=0.5, learner_token_s=0.001)


def one(*args: float, cost: GpuCost = C) -> float:
    return float(gpu_step_seconds(*args, cost)[0])


def test_closed_form():
    # one round, 8 rows in 8 slots, longest 10 tokens, 40 tokens trained: 0.5 + 0.01 * 10 * 1 + 0.001 * 40
    assert one(1, 10, 8, 40) == pytest.approx(0.5 + 0.1 + 0.04)
    # 3 rounds, 48 rows -> 16 a round -> 2 waves each: 3 * (0.5 + 0.01 * 10 * 2) + 0
    assert one(3, 10, 48, 0) == pytest.approx(3 * (0.5 + 0.2))
    # 17 rows in one round of 8 slots: 3 waves
    assert one(1, 4, 17, 0) == pytest.approx(0.5 + 0.01 * 4 * 3)
    assert one(0, 0, 0, 100) == pytest.approx(0.1)  # no sampling at all: the learner alone
    series = gpu_step_seconds([1, 3], [10, 10], [8, 48], [40, 0], C)
    assert series.tolist() == pytest.approx([0.64, 2.1])
    # the defaults: GRPO-n4 at full slots, 200-token completions
    assert one(1, 200, 64, 12_800, cost=GpuCost()) == pytest.approx(0.02 + 1.0 + 0.32)


def test_rows_per_round_give_each_round_its_waves():
    # rounds of 20, 8 and 3 rows on 8 slots: 3 + 1 + 1 waves, not 3 x ceil(31 / 3 / 8) = 6
    assert one(3, 10, 31, 0) == pytest.approx(3 * 0.5 + 0.01 * 10 * 6)
    exact = gpu_step_seconds(3, 10, 31, 0, C, rows_per_round=[[20, 8, 3]])
    assert float(exact[0]) == pytest.approx(3 * 0.5 + 0.01 * 10 * 5)
    assert gpu_step_seconds([0], [0], [0], [10], C, rows_per_round=[[]]).tolist() == pytest.approx([0.01])
    with pytest.raises(ValueError, match=r"rows_per_round\[0\] \(step 1\) lists 2 rounds but rounds\[0\] is 3"):
        gpu_step_seconds(3, 10, 31, 0, C, rows_per_round=[[20, 11]])
    with pytest.raises(ValueError, match="rows_per_round has 2 steps"):
        gpu_step_seconds(3, 10, 31, 0, C, rows_per_round=[[20, 8, 3], [1]])
    with pytest.raises(ValueError, match=r"rows_per_round\[0\]\[1\] \(round 2\)"):
        gpu_step_seconds(3, 10, 31, 0, C, rows_per_round=[[20, -8, 3]])


def test_monotone_in_rounds_and_length_but_not_in_rows_within_a_wave():
    base = one(2, 10, 16, 50)
    assert one(3, 10, 16, 50) > base  # one more sequential round
    assert one(2, 11, 16, 50) > base  # a longer longest completion
    assert one(2, 10, 16, 60) > base  # more trained tokens
    assert one(2, 10, 9, 50) == one(2, 10, 16, 50)  # 9..16 rows over 2 rounds of 8 slots: one wave a round
    assert one(2, 10, 17, 50) > base  # a second wave
    for rows in range(1, 9):  # within one wave decode is free of rows
        assert one(1, 10, rows, 0) == one(1, 10, 1, 0)


def record(steps: int = 4) -> dict:
    return {
        "key": "main/p/a/lr0.001/seed0",
        "steps": steps,
        "eval_step": [0, 2, steps],
        "time_step_s": [0.1, 0.2, 0.3, 0.4][:steps],
        "rounds": [1, 2, 1, 3][:steps],
        "max_completion_tokens": [8, 8, 6, 7][:steps],
        "samples_per_step": [8, 16, 8, 24][:steps],
        "tokens_trained": [40, 40, 40, 40][:steps],
    }


def test_cumulative_sums_align_with_eval_steps():
    rec = record()
    assert cumulative(rec, "cpu") == pytest.approx([0.0, 0.3, 1.0])
    assert cumulative(rec) == cumulative(rec, cpu_step_seconds)
    per = gpu_record_seconds(rec, C)
    expected = [0.5 + 0.08 + 0.04, 2 * (0.5 + 0.08) + 0.04, 0.5 + 0.06 + 0.04, 3 * (0.5 + 0.07) + 0.04]
    assert per.tolist() == pytest.approx(expected)
    assert cumulative(rec, lambda r: gpu_record_seconds(r, C)) == pytest.approx([0.0, sum(expected[:2]), sum(expected)])
    assert cumulative(rec, "gpu") == pytest.approx([0.0, *np.cumsum(gpu_record_seconds(rec))[[1, 3]]])


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        ((1, -1, 8, 0), r"max_completion_tokens\[0\] \(step 1\)"),
        (([1, 1], [8, 8], [8, math.nan], [0, 0]), r"samples\[1\] \(step 2\)"),
        (([1, 1], [8], [8, 8], [0, 0]), "max_completion_tokens has 1 entries but the other series have 2"),
        ((0, 8, 8, 0), r"rounds\[0\] \(step 1\) is 0 but 8 samples"),
        ((1, 8, 8, math.inf), "tokens_trained"),
        ((1, "x", 8, 0), "max_completion_tokens must be numbers"),
    ],
)
def test_bad_series_are_named(args, msg):
    with pytest.raises(ValueError, match=msg):
        gpu_step_seconds(*args, C)


def test_bad_records_and_costs():
    rec = record()
    with pytest.raises(ValueError, match="no per-step series 'rounds'.*rerun"):
        cumulative({k: v for k, v in rec.items() if k != "rounds"}, "gpu")
    with pytest.raises(ValueError, match=r"time_step_s\[1\] \(step 2\) is nan"):
        cumulative({**rec, "time_step_s": [0.1, float("nan"), 0.3, 0.4]})
    with pytest.raises(ValueError, match="3 step times for a record of 4 steps"):
        cumulative({**rec, "time_step_s": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match=r"eval_step\[2\] is 5"):
        cumulative({**rec, "eval_step": [0, 2, 5]})
    with pytest.raises(ValueError, match="unknown cost model 'tpu'"):
        cumulative(rec, "tpu")
    for bad, msg in (
        ({"slots": 0}, "slots"),
        ({"token_time_s": -1.0}, "token_time_s"),
        ({"learner_token_s": math.nan}, "learner"),
    ):
        with pytest.raises(ValueError, match=msg):
            GpuCost(**bad)


def test_a_run_record_has_what_both_models_read(tmp_path, model_dir, tiny_llama, char_tokenizer):
    from reinforce_ada.bench.arms import parse_arm
    from reinforce_ada.bench.run import Job, run_job
    from reinforce_ada.bench.testbed import build_pool, parse_pool

    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    job = Job(
        pool="p",
        arm="seq",
        strategy=parse_arm("seq:exit=balanced"),
        lr=1e-3,
        seed=0,
        steps=3,
        batch_size=4,
        eval_every=2,
        model_path=str(model_dir),
        train_path=pool.train_path,
        eval_path=pool.eval_path,
        level_weights=pool.level_weights,
        run_dir=str(tmp_path / "run"),
        check_samples=0,
    )
    rec = run_job(job)
    for key in (*GPU_SERIES, "samples_trained", "time_step_s"):
        assert len(rec[key]) == 3 and all(math.isfinite(v) for v in rec[key]), key
    assert all(r >= 1 for r in rec["rounds"])
    for rows, r, s in zip(rec["rows_per_round"], rec["rounds"], rec["samples_per_step"], strict=True):
        assert len(rows) == r and 0 < sum(rows) <= s
    assert all(1 <= m <= job.max_new_tokens for m in rec["max_completion_tokens"])
    # every trained sample is one of the generated ones, so its tokens are at most the longest completion each
    for t, s, m in zip(rec["tokens_trained"], rec["samples_trained"], rec["max_completion_tokens"], strict=True):
        assert s <= t <= s * m
    assert len(cumulative(rec, "gpu")) == len(cumulative(rec, "cpu")) == len(rec["eval_step"]) == 3
    assert cumulative(rec, "cpu")[-1] == pytest.approx(sum(rec["time_step_s"]))
    assert set(rec["load"]) == {"start", "end", "cores"} and "cores" in rec["cpu"]


def test_doctests():
    import doctest

    from reinforce_ada.bench import costmodel

    assert doctest.testmod(costmodel).attempted >= 2 and doctest.testmod(costmodel).failed == 0
