"""Compute-to-target statistics (bench.compute): closed-form synthetic curves."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada.bench import compute
from reinforce_ada.bench.arms import resolve_arms
from reinforce_ada.bench.compare import CompareConfig, plan_jobs
from reinforce_ada.bench.compute import axis_x
from reinforce_ada.bench.equal_tokens import level_at, table
from reinforce_ada.bench.run import run_job
from reinforce_ada.bench.testbed import BUILTIN_POOLS, _filter, build_pool, parse_pool, with_size
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.training.warm_start import SHIPPED_DIR
from tests.helpers import bench_job

STEPS = 200


def record(arm, seed, *, speed=1.0, tokens=100.0, sec=0.1, top=0.3, steps=STEPS, lr=1e-4, noise=0.0):
    """A run whose accuracy at step s is 0.2 + top (1 - exp(-speed s / 60)), `tokens` and `sec` per step."""
    ev = list(range(0, steps + 1, 10))
    rng = np.random.default_rng(seed)
    acc = [0.2 + top * (1 - np.exp(-speed * s / 60)) + (noise * rng.normal() if s else 0.0) for s in ev]
    return {
        "key": f"main/p/{arm}/lr{lr:g}/seed{seed}",
        "arm": arm,
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "eval_step": ev,
        "accuracy": acc,
        "eval_tokens": [tokens * s for s in ev],
        "time_step_s": [sec] * steps,
    }


def pool(arms: dict[str, dict], seeds=range(5)):
    return [record(a, s, **kw) for a, kw in arms.items() for s in seeds]


UNIFORM = ("grpo-n2", "grpo-n4", "grpo-n8")


def test_tokens_factor_is_exact_for_a_rescaled_curve():
    recs = pool({"grpo-n4": {"steps": 400}, "cheap": {"tokens": 50.0}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("steps", "tokens", "cpu_s"))
    row = out["table"]["cheap"]
    assert row["tokens"]["value"] == pytest.approx(2.0, rel=1e-6)
    assert row["steps"]["value"] == pytest.approx(1.0, rel=1e-6)
    assert row["tokens"]["t_lo"] == pytest.approx(2.0, rel=1e-6)  # identical seeds: a zero-width interval
    for f, cell in row["tokens_per_target"].items():
        assert cell["value"] == pytest.approx(2.0, rel=1e-3), f


def test_best_uniform_is_chosen_per_axis():
    # n8 learns twice as fast per step and costs twice the tokens: equal on tokens, better on steps and seconds
    recs = pool({"grpo-n4": {"steps": 400}, "grpo-n8": {"speed": 2.0, "tokens": 200.0, "steps": 400}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("steps", "tokens", "cpu_s"))
    assert out["axes"]["steps"]["best_uniform"] == "grpo-n8"
    assert out["axes"]["cpu_s"]["best_uniform"] == "grpo-n8"
    scores = out["axes"]["tokens"]["uniform_vs_grpo_n4"]
    assert scores["grpo-n8"] == pytest.approx(1.0, rel=0.03)  # linear interpolation between evaluations
    assert out["table"]["grpo-n4"]["steps"]["value"] == pytest.approx(0.5, rel=0.03)


def test_misses_are_listed_per_target_not_averaged_in():
    recs = pool({"grpo-n4": {"steps": 400}, "stuck": {"top": 0.1}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("tokens",))
    high = out["table"]["stuck"]["tokens_per_target"]["0.9"]
    assert high["missed"] == list(range(5)) and high["value"] is None
    low = out["table"]["stuck"]["tokens_per_target"]["0.1"]
    assert not low["missed"] and low["value"] is not None


def test_oracle_share_is_the_linear_share_of_the_oracle_gain():
    recs = pool({"grpo-n4": {"steps": 400}, "arm": {"tokens": 50.0}, "oracle-both": {"tokens": 100 / 3}})
    out = compute.summarize(recs, [], UNIFORM, ("oracle-select", "oracle-both"), axes=("tokens",))
    assert out["oracle"] == "oracle-both"
    assert out["table"]["arm"]["oracle_share"]["value"] == pytest.approx(0.5, rel=1e-5)
    heads = compute.headline(out, "arm")
    assert heads["ceiling"]["value"] == pytest.approx(3.0, rel=1e-5)
    assert heads["tokens"]["value"] == pytest.approx(2.0, rel=1e-5)
    assert compute.best_after_the_fact(out, ("grpo-n4", "oracle-both"))["arm"] == "arm"


def test_seconds_axis_sums_the_recorded_step_times():
    r = record("a", 0, sec=0.5)
    assert compute.axis_x(r, "cpu_s")[:3] == pytest.approx([0.0, 5.0, 10.0])
    with pytest.raises(ValueError, match="unknown cost axis"):
        compute.axis_x(r, "joules")
    short = dict(r, time_step_s=[0.1] * 5)
    with pytest.raises(ValueError, match="step times"):
        compute.axis_x(short, "cpu_s")


def test_equal_lr_reads_the_sweep_at_the_references_lr():
    main = pool({"grpo-n4": {"steps": 400, "lr": 1e-4}, "arm": {"lr": 2e-4}})
    sweep = [record("grpo-n4", 1000 + s, lr=1e-4, steps=400) for s in range(3)] + [
        record("arm", 1000 + s, lr=1e-4, tokens=80.0) for s in range(3)
    ]
    out = compute.summarize(main, sweep, UNIFORM, (), axes=("tokens",))
    eq = out["equal_lr"]
    assert eq["lr"] == 1e-4 and eq["reference"] == "grpo-n4"
    assert eq["arms"]["arm"]["value"] == pytest.approx(1.25, rel=1e-6)


def test_the_uniform_family_needs_grpo_n4():
    with pytest.raises(ValueError, match="grpo-n4"):
        compute.summarize(pool({"grpo-n8": {}}), [], UNIFORM, ())


def test_the_factor_panel_draws_every_arm_with_a_factor():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reinforce_ada.bench.report import _factor_panel

    recs = pool({"grpo-n4": {"steps": 400}, "arm": {"tokens": 50.0}, "oracle-both": {"tokens": 40.0}})
    comp = compute.summarize(recs, [], UNIFORM, ("oracle-both",), axes=("tokens",))
    fig, ax = plt.subplots()
    _factor_panel(ax, comp, "p")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["grpo-n4", "arm", "oracle-both"]
    plt.close(fig)


def test_a_prior_pass_is_charged_on_the_seconds_axes_and_an_untimed_one_undefines_only_its_arm():
    from reinforce_ada.bench.costmodel import ROW_SCALE, UnpricedPrior, gpu_step_seconds, prior_seconds

    r = record("spo-prior", 0) | {"prior": {"samples": 40, "tokens": 400, "seconds": 7.0}}
    steps = compute.axis_x(r, "cpu_s", steps_only=True)
    assert compute.axis_x(r, "cpu_s") == pytest.approx([x + 7.0 for x in steps])  # 7 s before step 1
    gpu = float(gpu_step_seconds([[40]], [0], row_scale=ROW_SCALE)[0])  # one round of its samples, nothing trained
    assert prior_seconds(r, "gpu") == pytest.approx(gpu) and gpu > 0
    assert prior_seconds(record("plain", 0), "cpu") == 0.0  # no prior pass: nothing charged
    untimed = r | {"prior": {"samples": 40, "tokens": 400}}
    with pytest.raises(UnpricedPrior, match="prior pass \\(40 samples\\) has no recorded seconds"):
        compute.axis_x(untimed, "cpu_s")
    with pytest.raises(ValueError, match="unknown cost model 'tpu'"):
        prior_seconds(r, "tpu")
    # the untimed arm has no CPU factor, said why; every other arm and axis keeps its figures
    recs = pool({"grpo-n4": {}, "cheap": {"sec": 0.05}})
    recs += [record("spo-prior", s) | {"prior": {"samples": 40, "tokens": 400}} for s in range(5)]
    out = compute.summarize(recs, [], UNIFORM, (), axes=("tokens", "cpu_s"))
    assert out["missing_axes"] == {} and out["table"]["cheap"]["cpu_s"]["value"] == pytest.approx(2.0, rel=1e-6)
    cell = out["table"]["spo-prior"]["cpu_s"]
    assert cell["value"] is None and "no recorded seconds" in cell["unpriced"]
    assert out["table"]["spo-prior"]["tokens"]["value"] is not None


# -- pools ------------------------------------------------------------------------------------------------------------
# The built-in pools of `reinforce-ada compare` (issue 22): `small` and `mixed` parse, build on the shipped warm start
# and have the shape their docstring promises; the `drop` band and exact-rate selection behave as documented.
@pytest.fixture(scope="module")
def warm():
    return AutoModelForCausalLM.from_pretrained(SHIPPED_DIR).eval(), AutoTokenizer.from_pretrained(SHIPPED_DIR)


def test_builtin_pools_parse():
    assert {"default", "hard", "small", "mixed"} <= set(BUILTIN_POOLS)
    small, default = parse_pool("small"), parse_pool("default")
    assert small.size == 256 and small.weights == default.weights and small.filter is small.drop is None
    mixed = parse_pool("mixed")
    assert (mixed.size, mixed.candidates, mixed.drop, mixed.filter, mixed.filter_samples) == (
        4096,
        8192,
        (0.5, 0.9),
        None,
        0,
    )
    assert with_size(mixed, 512).candidates == 1024


def test_drop_and_exact_selection():
    rates = np.array([0.0, 0.3, 0.6, 0.95, 1.0])
    rng = np.random.default_rng(0)
    exact_drop = parse_pool("x=arithmetic:weights=1,drop=0.5-0.9,filter_samples=0")
    assert _filter(rates, exact_drop, rng).tolist() == [0, 1, 3, 4]
    both = parse_pool("x=arithmetic:weights=1,filter=0-0.97,drop=0.5-0.9,filter_samples=0")
    assert _filter(rates, both, rng).tolist() == [1, 3]  # kept in (0, 0.97], minus (0.5, 0.9]
    # with draws, p = 0 and p = 1 give c/k = 0 and 1 for sure: the drop band never removes them
    drawn = parse_pool("x=arithmetic:weights=1,drop=0.2-0.8,filter_samples=16")
    kept = _filter(np.array([0.0, 1.0] * 50), drawn, rng)
    assert kept.tolist() == list(range(100))
    for bad, msg in (
        ("x=arithmetic:weights=1,drop=0.9-0.5", "lo"),
        ("x=arithmetic:weights=1,drop=a-b", "drop"),
        ("x=arithmetic:weights=1,filter_samples=-1", "filter_samples"),
    ):
        with pytest.raises(ConfigError, match=msg):
            parse_pool(bad)


def test_small_pool_keeps_the_default_mix(tmp_path, warm):
    pool = build_pool(parse_pool("small"), *warm, tmp_path)
    assert len(pool.train) == 256 == len({p.id for p in pool.train})
    default = dict(zip(range(1, 8), parse_pool("default").weights, strict=True))
    for level, share in pool.level_weights:
        assert share == pytest.approx(default[level], abs=0.01)
    assert 0.1 < pool.stats["mean"] < 0.2  # documented: 0.148


def test_mixed_pool_has_heavy_solved_and_hopeless_tails(tmp_path, warm):
    pool = build_pool(with_size(parse_pool("mixed"), 512), *warm, tmp_path)
    r = pool.train_rates
    assert len(pool.train) == 512
    assert (r > 0.9).mean() >= 0.25 and (r < 0.05).mean() >= 0.25
    assert ((r >= 0.05) & (r <= 0.9)).mean() >= 0.2
    assert not ((r > 0.5) & (r <= 0.9)).any()  # the exact-rate band is gone, in training ...
    assert not ((pool.held_out_rates > 0.5) & (pool.held_out_rates <= 0.9)).any()  # ... and held-out prompts


# -- equal tokens -----------------------------------------------------------------------------------------------------
# Arms run to an equal token budget: a run stops at the budget and is evaluated on a token grid, an arm may set its
# own prompts per step and buy its prior with samples (charged in tokens), and the table reads every arm's level at
# the budget against the best uniform arm, paired by seed.
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
