"""`bench.costmodel`: the GPU formula in closed form (a later round without prefill, with its own rows and its own
straggler), the length model against sampling, cumulative seconds at the evaluated steps, clear errors; and a real
`run_job` record carries every series the models read. Its fit to the paper's Table 3:
`studies/compute_to_target/tests/test_gpu_paper.py`."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada.bench.costmodel import (
    GPU_SERIES,
    ROW_SCALE,
    GpuCost,
    cpu_step_seconds,
    cumulative,
    decode_steps,
    expected_longest,
    gpu_record_seconds,
    gpu_step_seconds,
    mean_length,
    round_seconds,
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


C = GpuCost(
    decode_step_s=0.01,
    row_token_s=0.001,
    step_s=2.0,
    learner_token_s=0.0005,
    slots=8,
    mean_tokens=10.0,
    length_sigma=0.5,
    max_tokens=40,
    prefill_s=0.5,
    round_s=0.25,
)


def one(rows: list[float], trained: float, cost: GpuCost = C) -> float:
    return float(gpu_step_seconds([rows], [trained], cost)[0])


def test_closed_form():
    mean, longest = mean_length(C), expected_longest
    # one round of 8 rows in 8 slots, 8 trained: step + round + prefill + decode of the straggler + throughput + learner
    expected = 2.0 + 0.25 + 0.5 + 0.01 * longest(8, C) + 0.001 * 8 * mean + 0.0005 * 8 * mean
    assert one([8], 8) == pytest.approx(expected)
    # a second round of 3 rows: no prefill (its prompts' prefix is cached), its own straggler and rows
    second = 0.25 + 0.01 * longest(3, C) + 0.001 * 3 * mean
    assert one([8, 3], 8) == pytest.approx(expected + second)
    # 17 rows in 8 slots: the straggler of 8 plus the queue's drain at 8 a step
    assert decode_steps(17, C) == pytest.approx(longest(8, C) + 9 * mean / 8)
    assert one([], 4) == pytest.approx(2.0 + 0.0005 * 4 * mean)  # no sampling at all: the step and the learner
    assert gpu_step_seconds([[8], [8, 3]], [8, 8], C).tolist() == pytest.approx([expected, expected + second])
    assert one([1], 0, C) == pytest.approx(one([4], 0, C) - 0.01 * (longest(4, C) - longest(1, C)) - 0.003 * mean)
    # row_scale multiplies rows and trained samples alike
    assert float(gpu_step_seconds([[2, 1]], [2], C, row_scale=4)[0]) == pytest.approx(one([8, 4], 8))


def test_the_length_model_is_a_capped_lognormal():
    c = GpuCost()
    rng = np.random.default_rng(0)
    s = c.length_sigma
    draws = np.minimum(np.ceil(rng.lognormal(np.log(c.mean_tokens) - s * s / 2, s, (4000, 64))), c.max_tokens)
    assert mean_length(c) == pytest.approx(draws.mean(), rel=0.01)
    assert expected_longest(64, c) == pytest.approx(draws.max(axis=1).mean(), rel=0.01)
    assert expected_longest(1, c) == pytest.approx(mean_length(c))
    assert expected_longest(0, c) == 0.0
    longest = [expected_longest(r, c) for r in (1, 8, 64, 512, 4096, 8192)]
    assert longest == sorted(longest) and longest[-1] == pytest.approx(c.max_tokens)  # grows with rows, to the cap


def test_later_rounds_cost_less_than_the_first():
    c = GpuCost()
    first = round_seconds(4096, c, True)
    later = [round_seconds(r, c, False) for r in (2008, 894, 180, 8)]
    assert later == sorted(later, reverse=True) and all(x < first for x in later)
    assert first - round_seconds(4096, c, False) == pytest.approx(c.prefill_s)  # the prefix is cached after round 1
    # the old model's failure: four rounds priced like the first made both Seq variants 3.4-3.5x GRPO
    grpo, seq = one([2048], 2048, c), one([4096, 894, 360, 180], 2048, c)
    assert 2.0 < seq / grpo < 2.5


def record(steps: int = 4) -> dict:
    return {
        "key": "main/p/a/lr0.001/seed0",
        "steps": steps,
        "eval_step": [0, 2, steps],
        "time_step_s": [0.1, 0.2, 0.3, 0.4][:steps],
        "rows_per_round": [[8], [8, 4], [8], [8, 4, 2]][:steps],
        "samples_trained": [8, 8, 8, 8][:steps],
    }


def test_cumulative_sums_align_with_eval_steps():
    rec = record()
    assert cumulative(rec, "cpu") == pytest.approx([0.0, 0.3, 1.0])
    assert cumulative(rec) == cumulative(rec, cpu_step_seconds)
    per = gpu_record_seconds(rec, C, row_scale=1)
    expected = [one([8], 8), one([8, 4], 8), one([8], 8), one([8, 4, 2], 8)]
    assert per.tolist() == pytest.approx(expected)
    model = lambda r: gpu_record_seconds(r, C, row_scale=1)  # noqa: E731
    assert cumulative(rec, model) == pytest.approx([0.0, sum(expected[:2]), sum(expected)])
    scaled = gpu_step_seconds(rec["rows_per_round"], rec["samples_trained"], row_scale=ROW_SCALE)
    assert cumulative(rec, "gpu") == pytest.approx([0.0, *np.cumsum(scaled)[[1, 3]]])


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (([[8, -1]], [8]), r"rows_per_round\[0\]\[1\] \(round 2\) is -1.0"),
        (([[8], [8]], [8, math.nan]), r"trained\[1\] \(step 2\) is nan"),
        (([[8], [8]], [8]), "rows_per_round has 2 steps but trained has 1"),
        (([[8]], [math.inf]), "trained"),
        (([["x"]], [8]), r"rows_per_round\[0\] must be numbers"),
    ],
)
def test_bad_series_are_named(args, msg):
    with pytest.raises(ValueError, match=msg):
        gpu_step_seconds(*args, C)


def test_bad_records_and_costs():
    rec = record()
    with pytest.raises(ValueError, match="no per-step series 'rows_per_round'.*rerun"):
        cumulative({k: v for k, v in rec.items() if k != "rows_per_round"}, "gpu")
    with pytest.raises(ValueError, match=r"time_step_s\[1\] \(step 2\) is nan"):
        cumulative({**rec, "time_step_s": [0.1, float("nan"), 0.3, 0.4]})
    with pytest.raises(ValueError, match="3 step times for a record of 4 steps"):
        cumulative({**rec, "time_step_s": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match=r"eval_step\[2\] is 5"):
        cumulative({**rec, "eval_step": [0, 2, 5]})
    with pytest.raises(ValueError, match="unknown cost model 'tpu'"):
        cumulative(rec, "tpu")
    with pytest.raises(ValueError, match="row_scale must be a finite number > 0, got 0"):
        gpu_step_seconds([[8]], [8], row_scale=0)
    for bad, msg in (
        ({"slots": 0}, "slots must be an integer >= 1, got 0"),
        ({"decode_step_s": -1.0}, "decode_step_s must be a finite number >= 0, got -1.0"),
        ({"learner_token_s": math.nan}, "learner_token_s"),
        ({"mean_tokens": 0.0}, "mean_tokens must be a finite number > 0, got 0.0"),
        ({"max_tokens": 2048.0}, "max_tokens must be an integer >= 1, got 2048.0"),
    ):
        with pytest.raises(ValueError, match=msg):
            GpuCost(**bad)


def test_a_run_record_has_what_both_models_read(tmp_path, model_dir, tiny_llama, char_tokenizer):
    from reinforce_ada.bench.arms import parse_arm
    from reinforce_ada.bench.run import run_job
    from reinforce_ada.bench.testbed import build_pool, parse_pool
    from tests.helpers import bench_job

    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    job = bench_job(pool, model_dir, tmp_path / "run", "seq", parse_arm("seq:exit=balanced"))
    rec = run_job(job)
    for key in ("rounds", "max_completion_tokens", "tokens_trained", "samples_trained", "time_step_s"):
        assert len(rec[key]) == 3 and all(math.isfinite(v) for v in rec[key]), key
    assert set(GPU_SERIES) <= set(rec)
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
    assert rec["epochs"] == 1  # updates per batch: the GPU models charge the learner once per update


def test_the_gpu_models_charge_the_learner_once_per_update():
    from reinforce_ada.bench.costmodel import GpuCost, gpu_length_seconds, gpu_record_seconds, mean_length

    rec = record()
    c = GpuCost()
    one, two = gpu_record_seconds(rec, c), gpu_record_seconds({**rec, "epochs": 2}, c)
    learner = c.learner_token_s * mean_length(c) * np.asarray(rec["samples_trained"], float) * ROW_SCALE
    assert two - one == pytest.approx(learner)  # the second update's learner time, nothing else
    lengths = {"longest_per_round": [[5]], "tokens_per_step": [40], "prefill_tokens_per_step": [10]}
    lengths |= {"tokens_trained": [30]}
    extra = gpu_length_seconds({**lengths, "epochs": 3}, c) - gpu_length_seconds(lengths, c)
    assert extra[0] == pytest.approx(2 * 30 * c.learner_token_s)
    with pytest.raises(ValueError, match=r"epochs = 0; an integer >= 1"):
        gpu_record_seconds({**rec, "epochs": 0}, c)


def test_doctests():
    import doctest

    from reinforce_ada.bench import costmodel

    assert doctest.testmod(costmodel).attempted >= 3 and doctest.testmod(costmodel).failed == 0


def test_a_trainer_step_records_the_whole_bill_and_the_length_model_prices_it(model_dir, tmp_path):
    """Generated tokens, prompt tokens (each sample its prompt; each distinct prompt once for a prefix cache) and the
    longest completion of each round reach the metrics, and `gpu_length_seconds` prices a step from them."""
    from reinforce_ada.bench.costmodel import GpuCost, gpu_length_seconds
    from reinforce_ada.training.trainer import Trainer
    from tests.helpers import train_config

    tr = Trainer(
        train_config(model_dir, tmp_path / "run", {"name": "seq", "samples_per_round": 2, "n": 2}), tensorboard=False
    )
    m = tr.train_step()
    seen = []
    for pid, pool in tr.strategy.pools.items():  # each prompt's samples and its prompt's length
        seen.append(
            (len(pool), len(tr.tokenizer(tr.strategy.prompts[pid].text, add_special_tokens=False)["input_ids"]))
        )
    tr.close()
    assert m["prompt_tokens"] == sum(k * n for k, n in seen) and m["prefill_tokens"] == sum(n for _, n in seen)
    assert len(m["longest_per_round"]) == m["rounds"] and max(m["longest_per_round"]) == m["max_completion_tokens"]
    rec = {
        "longest_per_round": [m["longest_per_round"]],
        "tokens_per_step": [m["tokens_generated"]],
        "prefill_tokens_per_step": [m["prefill_tokens"]],
        "tokens_trained": [m["tokens_trained"]],
    }
    c = GpuCost()
    want = (
        c.step_s
        + c.prefill_token_s * m["prefill_tokens"]
        + c.row_token_s * m["tokens_generated"]
        + c.learner_token_s * m["tokens_trained"]
        + c.decode_step_s * sum(m["longest_per_round"])
    )
    assert float(gpu_length_seconds(rec, c)[0]) == pytest.approx(want)
    with pytest.raises(ValueError, match="made before bench.run kept this series"):
        gpu_length_seconds({"tokens_per_step": [1]}, c)


def test_the_long_answer_axes_read_prompt_tokens_and_the_length_model():
    from reinforce_ada.bench.compute import axis_x
    from reinforce_ada.bench.costmodel import GpuCost, gpu_length_seconds

    rec = {
        "key": "r",
        "steps": 2,
        "eval_step": [0, 2],
        "eval_tokens": [40, 140],  # the prior pass's 40 generated tokens charged from step 0
        "prompt_tokens_per_step": [30, 20],
        "longest_per_round": [[10], [12, 3]],
        "tokens_per_step": [60, 40],
        "prefill_tokens_per_step": [10, 10],
        "tokens_trained": [50, 30],
        "prior": {"samples": 8, "tokens": 40, "prompt_tokens": 16, "prefill_tokens": 4, "longest": 9},
    }
    assert axis_x(rec, "bill_tokens") == [40 + 16, 140 + 50 + 16]
    c = GpuCost()
    steps = gpu_length_seconds(rec, c)
    prior = c.decode_step_s * 9 + c.row_token_s * 40 + c.prefill_token_s * 4
    assert axis_x(rec, "gpu_len_s") == pytest.approx([prior, prior + steps.sum()])
    with pytest.raises(ValueError, match="unknown cost axis 'bill'"):
        axis_x(rec, "bill")


# -- gpu check --------------------------------------------------------------------------------------------------------
# benchmarks/gpu_check.py at toy sizes on the CPU: every section runs (the GPU run is the same code on CUDA).
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    # the repository root is on sys.path (pytest's `pythonpath`), as for `python -m benchmarks.gpu_check`
    return importlib.import_module("benchmarks.gpu_check")


def test_synthetic_reward_pass_rate_follows_the_answer(gpu_check):
    # a bucket's pass rate: the share of distinct completions whose hash falls below it
    for answer in ("3", "17", "42", "108", "999"):
        rate = gpu_check.RATES[gpu_check.zlib.crc32(answer.encode()) % len(gpu_check.RATES)]
        mean = sum(gpu_check.synthetic_reward(f"completion {i}", answer) for i in range(4000)) / 4000
        assert abs(mean - rate) < 0.03, (answer, rate, mean)


def test_padded_tokenizer_keeps_the_char_ids(gpu_check):
    from reinforce_ada.models.tiny import build_char_tokenizer

    tok = gpu_check.padded_char_tokenizer(300, 128)
    assert len(tok) == 300
    text = "<bos>12+34=46<eos>"
    assert tok.encode(text) == build_char_tokenizer().encode(text)
    assert tok.decode([2, 5, 299, 1], skip_special_tokens=True) == "1<t299>"
    with pytest.raises(ValueError, match="vocab_size=5"):
        gpu_check.padded_char_tokenizer(5, 128)


@pytest.mark.slow
def test_tiny_run_measures_every_section(gpu_check, tmp_path):
    assert gpu_check.main(["--tiny", "--device", "cpu", "--big", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert (tmp_path / "gpu_check.png").stat().st_size > 0
    assert res["env"]["device"] == "cpu" and res["env"]["torch"]
    for key, dtypes in (("generation", ("float32", "bfloat16")), ("generation_big", ("bfloat16",))):
        for dtype in dtypes:
            for name, p, k in gpu_check.TINY.workloads[: 2 if key == "generation" else 1]:
                cell = res[key][dtype][name]
                assert cell["engine_class"] == "SlotEngine" and cell["rows"] == p * k
                for side in ("engine", "hf_engine", "generate"):
                    assert len(cell[side]["seconds"]) == gpu_check.TINY.repeats
                    assert 0 < cell[side]["min"] <= cell[side]["tokens_per_s"] <= cell[side]["max"]
                    assert all(0 < t <= p * k * gpu_check.TINY.max_new_tokens for t in cell[side]["tokens"])
    t = res["training"]
    assert t["steps_timed"] == gpu_check.TINY.steps
    assert set(t["median"]) == set(gpu_check.TRAIN_ARMS)
    assert set(t["engines"].values()) == {"SlotEngine"}
    for arm, m in t["median"].items():
        assert m["time_step_s"] >= m["time_generate_s"] > 0, arm
        # GRPO-n4 samples exactly n per prompt; Ada-Seq at least its first round of M=8
        low = 4 if arm.startswith("grpo") else 8
        assert m["samples_generated"] >= low * gpu_check.TINY.train_batch, arm
        assert m["samples_trained"] == 4 * gpu_check.TINY.train_batch, arm
    # fp32 sampler and learner agree to float rounding; bf16 autocast in the learner does not
    assert t["median"]["grpo-n4"]["mismatch_logp_abs_max"] < 1e-4
    assert t["median"]["grpo-n4 bf16"]["mismatch_logp_abs_max"] > t["median"]["grpo-n4"]["mismatch_logp_abs_max"]
    paths = t["paths"]
    assert all(p["ok"] for p in paths.values()), paths
    assert (
        paths["resume_and_step"]["result"]["resumed"]
        and paths["resume_and_step"]["result"]["weights_equal_after_resume"]
    )
    assert paths["evaluate"]["result"]["eval_prompts"] > 0


def test_no_cuda_or_no_transformers_is_a_clear_exit(gpu_check, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--tiny", "--device", "cuda", "--out", str(tmp_path)]) == 2
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "CUDA is not available" in res["error"] and "generation" not in res
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    assert gpu_check.main(["--tiny", "--out", str(tmp_path)]) == 2
    assert "transformers is not installed" in json.loads((tmp_path / "gpu_check.json").read_text())["error"]
    assert "transformers is not installed" in capsys.readouterr().out
