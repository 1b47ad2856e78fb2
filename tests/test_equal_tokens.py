"""Arms run to an equal token budget: a run stops at the budget and is evaluated on a token grid, an arm may set its own
prompts per step and buy its prior with samples (charged in tokens), and the table reads every arm's level at the
budget against the best uniform arm, paired by seed."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.bench.arms import resolve_arms
from reinforce_ada.bench.compare import CompareConfig, plan_jobs
from reinforce_ada.bench.compute import axis_x
from reinforce_ada.bench.equal_tokens import level_at, table
from reinforce_ada.bench.run import run_job
from reinforce_ada.bench.testbed import build_pool, parse_pool
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from tests.helpers import bench_job


def rec(arm: str, seed: int, levels: list[float], budget: float = 100.0) -> dict:
    x = list(np.linspace(0, budget, len(levels)))
    return {"arm": arm, "seed": seed, "eval_tokens": x, "accuracy": levels}


def test_the_level_at_the_budget_is_the_tails_mean_and_a_short_run_has_none():
    assert level_at(rec("a", 0, [0.1, 0.2, 0.3, 0.5, 0.7]), 100) == pytest.approx(0.7)  # only 100 is in [80, 100]
    assert level_at({"eval_tokens": [0, 85, 90, 100], "accuracy": [0, 0.4, 0.5, 0.6]}, 100) == pytest.approx(0.5)
    assert level_at({"eval_tokens": [0, 70, 103], "accuracy": [0, 0.4, 0.5]}, 100) == pytest.approx(0.5)  # past B
    assert level_at({"eval_tokens": [0, 50], "accuracy": [0.1, 0.2]}, 100) is None


def test_the_table_pairs_every_arm_with_the_best_uniform_arm_by_seed():
    records = [rec("grpo-n4", s, [0.1, 0.3 + 0.01 * s]) for s in range(3)]
    records += [rec("grpo-n2", s, [0.1, 0.35 + 0.01 * s]) for s in range(3)]  # the best uniform arm
    records += [rec("spo", s, [0.1, 0.40 + 0.02 * s]) for s in range(3)]
    records.append({"arm": "spo", "seed": 3, "eval_tokens": [0, 10], "accuracy": [0.1, 0.2]})  # stopped short
    t = table(records, ["grpo-n2", "grpo-n4", "grpo-n8"], 100)
    assert t["best_uniform"] == "grpo-n2"
    spo = t["arms"]["spo"]
    assert spo["diff_per_seed"] == pytest.approx({"0": 0.05, "1": 0.06, "2": 0.07})
    assert spo["diff"] == pytest.approx(0.06) and spo["missing_seeds"] == [3]
    lo, hi = spo["diff_interval"]
    assert lo < 0.06 < hi and lo > 0  # 0.06 +- 2.92 x 0.01 / sqrt(3)
    with pytest.raises(ValueError, match="no uniform arm"):
        table(records, ["grpo-n16"], 100)


def test_arm_settings_prompts_per_step_and_prior_samples():
    arms, _ = resolve_arms(
        ["grpo-n4", "spo64=spo | run.batch_size=64", "spo-prior=spo | run.batch_size=64,prior.samples=8"]
    )
    assert dict(arms[1].train) == {"run.batch_size": 64}
    assert dict(arms[2].train) == {"run.batch_size": 64, "prior.samples": 8}
    for bad, match in (
        ("x=spo | run.steps=5", "run.steps cannot differ between arms; an arm may set optim.KEY=VALUE"),
        ("x=spo | prior.samples=0", "prior.samples=0 must be a whole number >= 1"),
        ("x=spo | run.batch_size=0", "run.batch_size=0 must be >= 1"),
    ):
        with pytest.raises(ConfigError, match=match):
            resolve_arms(["grpo-n4", bad])


def test_a_token_budget_ends_every_arm_alike(tmp_path, tiny_llama, char_tokenizer):
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    arms, _ = resolve_arms(["grpo-n4", "spo16=spo | run.batch_size=16"])
    c = CompareConfig(steps=1000, seeds=2, other_seeds=2, token_budget=5000, eval_points=10)
    jobs = plan_jobs(c, arms, [pool], "m", {pool.spec.name: {a.name: 2e-4 for a in arms}})
    assert {(j.steps, j.max_tokens, j.eval_every_tokens) for j in jobs} == {(1000, 5000, 500)}  # no arm runs longer
    assert {j.prompts_per_step for j in jobs if j.arm == "spo16"} == {16}


def test_one_run_to_a_token_budget_with_its_prior_charged(tmp_path, model_dir, tiny_llama, char_tokenizer):
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    job = bench_job(
        pool,
        model_dir,
        tmp_path / "run",
        "spo-prior",
        parse_arm("spo"),
        steps=50,
        eval_every=1000,
        train=(("prior.samples", 2), ("run.batch_size", 8)),
        max_tokens=1500,
        eval_every_tokens=300,
    )
    r = run_job(job)
    prior = r["prior"]["tokens"]
    assert r["prior"]["samples"] == 2 * len(pool.train) and prior > 0  # every training prompt, twice
    assert r["eval_tokens"][0] == prior  # the start already carries the prior's cost
    assert r["prior"]["seconds"] > 0 and axis_x(r, "cpu_s")[0] == pytest.approx(r["prior"]["seconds"])  # and its time
    assert r["eval_tokens"][-1] >= 1500 and r["eval_tokens"][-2] < 1500  # stopped at the first step past the budget
    assert all(s == 8 for s in r["samples_per_step"])  # one sample for each of the arm's 8 prompts per step
    assert r["steps"] == len(r["samples_per_step"]) < 50
    cells = [(t - prior) // 300 for t in r["eval_tokens"][:-1]]  # the end is evaluated wherever it falls
    assert all(a < b for a, b in zip(cells, cells[1:], strict=False))  # one evaluation per 300 tokens, at most


def test_the_value_probe_logs_the_trackers_and_the_groups_errors(tmp_path, model_dir, tiny_llama, char_tokenizer):
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    common = dict(eval_every=3, value_errors=True)
    spo = run_job(bench_job(pool, model_dir, tmp_path / "a", "spo", parse_arm("spo"), **common))
    grpo = run_job(bench_job(pool, model_dir, tmp_path / "b", "grpo-n4", parse_arm("uniform:n=4"), **common))
    assert len(spo["value_abs_error"]) == 3 and all(0 <= e <= 1 for e in spo["value_abs_error"])
    assert all(0 <= e <= 1 for e in grpo["group_mean_abs_error"]) and all(np.isnan(grpo["value_abs_error"]))
    # the tiny random model solves almost nothing: SPO's first value (its prior's 0.5) is about 0.5 off
    assert spo["value_abs_error"][0] == pytest.approx(0.5, abs=0.05)
