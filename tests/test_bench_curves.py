"""The compare benchmark's statistics on synthetic curves whose true speed factor is known."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks import harness
from reinforce_ada.bench import curves
from reinforce_ada.bench.curves import (
    area_gain,
    area_ratio,
    bootstrap,
    crossing,
    isotonic,
    median_with_misses,
    paired_factor,
    ratio_of_means,
    scale_factor,
)
from reinforce_ada.types import Prompt


def g(x):
    return 0.15 + 0.25 * (1 - np.exp(-np.asarray(x, dtype=float) / 150))


X_REF = np.arange(0, 401, 10)  # the reference runs twice as long as the arm
X_ARM = np.arange(0, 201, 10)


def test_isotonic_is_the_monotone_least_squares_fit():
    y = np.array([0.1, 0.3, 0.2, 0.4, 0.35, 0.5])
    f = isotonic(y)
    assert np.all(np.diff(f) >= 0) and f.sum() == pytest.approx(y.sum())  # PAV keeps the mean of each block
    assert isotonic([0.1, 0.2, 0.3]).tolist() == [0.1, 0.2, 0.3]
    assert isotonic([0.3, 0.2, 0.1]).tolist() == pytest.approx([0.2, 0.2, 0.2])


def test_crossing_interpolates_and_ignores_blips():
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3) == pytest.approx(15.0)
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.5) is None
    # a one-point blip to 0.5 is pooled away by the isotonic fit: 0.45 is never "reached"
    assert crossing([0, 10, 20, 30], [0.1, 0.5, 0.2, 0.3], 0.45) is None
    with pytest.raises(ValueError, match="increasing"):
        crossing([0, 10, 10], [0.1, 0.2, 0.3], 0.15)


def test_a_crossing_read_at_step_ends_and_the_half_step_it_removes():
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 1, 2]) == pytest.approx(20.0)  # one tread
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 5, 15]) == pytest.approx(15.0)  # on a step end
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.31, steps=[0, 5, 15]) == pytest.approx(16.0)  # the next one
    assert crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.05, steps=[0, 1, 2]) == 0.0  # met at the start
    # two arms of the same smooth curve on tokens, one evaluated after every step of 10 tokens, the other stepping 10x
    # as long: the straight line reads them the same (k = 1); at step ends the long-step arm pays its treads
    x = np.arange(0, 401, 100.0)
    y = 1 - np.exp(-x / 200)
    ks = [scale_factor((x, y), (x, y), steps=(x / 10, x / m))["k"] for m in (10, 100)]
    assert scale_factor((x, y), (x, y))["k"] == pytest.approx(1.0) and ks[0] == pytest.approx(1.0)
    assert 0.5 < ks[1] < 0.9  # the long-step arm's crossings move to its step ends: later, so k < 1
    with pytest.raises(ValueError, match="steps has 2 entries for a curve of 3"):
        crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 1])
    with pytest.raises(ValueError, match="steps must increase"):
        crossing([0, 10, 20], [0.1, 0.2, 0.4], 0.3, steps=[0, 1, 1])


@pytest.mark.parametrize("true_k", [0.5, 1.0, 1.5, 2.0, 3.0])
def test_scale_factor_recovers_a_known_time_compression(true_k):
    k = scale_factor((X_REF, g(X_REF)), (X_ARM, g(true_k * X_ARM)))
    assert k["k"] == pytest.approx(true_k, rel=0.02)
    # the arm ends where the reference is at step 200 k: the shared range is the lower curve's
    assert k["top"] == pytest.approx(float(g(min(400, 200 * true_k))), abs=1e-9)


def test_scale_factor_on_tokens_reads_the_token_axis():
    # the arm spends 5x the tokens per step and is 2x faster per step: 0.4x per token
    tokens_ref, tokens_arm = X_REF * 100.0, X_ARM * 500.0
    assert scale_factor((tokens_ref, g(X_REF)), (tokens_arm, g(2 * X_ARM)))["k"] == pytest.approx(0.4, rel=0.02)


def test_noisy_seeds_interval_covers_the_true_factor():
    rng = np.random.default_rng(0)
    ks = []
    for _ in range(9):
        ref = g(X_REF) + rng.normal(0, 0.006, len(X_REF))
        arm = g(2 * X_ARM) + rng.normal(0, 0.006, len(X_ARM))
        ref[0] = arm[0] = g(0)  # paired seeds start from the same model
        ks.append(scale_factor((X_REF, ref), (X_ARM, arm))["k"])
    f = paired_factor(ks)
    assert f["lo"] <= 2.0 <= f["hi"] and f["hi"] - f["lo"] < 0.5
    assert f["value"] == pytest.approx(2.0, rel=0.1) and f["undefined"] == 0


def test_scale_factor_undefined_without_a_shared_gain():
    flat = np.full(len(X_ARM), 0.15)
    out = scale_factor((X_REF, g(X_REF)), (X_ARM, flat))
    assert out["k"] is None and out["ref_gain_share"] == pytest.approx(0.0)
    f = paired_factor([2.0, None, 2.2])
    assert f["undefined"] == 1 and f["value"] == pytest.approx(np.sqrt(2.0 * 2.2))


@pytest.mark.parametrize("n", [1, 2, 3, 9, 17])
def test_the_factor_interval_is_the_resampling_bootstrap_drawn_at_once(n):
    """paired_factor's interval draws every resample in one array: the same resamples and quantiles as `bootstrap`
    over `geo_mean` (published intervals do not move)."""
    per_seed = np.exp(np.random.default_rng(n).normal(0, 0.4, n))
    f = paired_factor(list(per_seed), seed=3)
    assert (f["lo"], f["hi"]) == bootstrap(n, lambda i: curves.geo_mean(per_seed[i]), seed=3)


def test_area_ratio_and_gain():
    assert area_ratio((X_REF, g(X_REF)), (X_ARM, g(X_ARM))) == pytest.approx(1.0)
    assert area_ratio((X_REF, g(X_REF)), (X_ARM, g(2 * X_ARM))) > 1.2
    with pytest.raises(ValueError, match="horizon"):
        area_ratio((X_ARM, g(X_ARM)), (X_REF, g(X_REF)))
    # to a token budget the reference may end first (483 steps against 490): the shorter horizon, both curves
    assert area_ratio((X_ARM, g(X_ARM)), (X_REF, g(X_REF)), common=True) == pytest.approx(1.0)
    assert area_ratio((X_ARM, g(X_ARM)), (X_REF, g(2 * X_REF)), common=True) == pytest.approx(
        area_ratio((X_REF, g(X_REF)), (X_ARM, g(2 * X_ARM)))
    )
    # linear gain 0 -> 0.2 over 100 steps: mean gain 0.1
    assert area_gain([0, 50, 100], [0.1, 0.2, 0.3]) == pytest.approx(0.1)
    assert area_gain([0, 50, 100], [0.1, 0.2, 0.3], horizon=50) == pytest.approx(0.05)


def test_bootstrap_ratio_and_medians():
    lo, hi = bootstrap(50, lambda i: float(np.mean(i)), reps=2000)
    assert lo < 24.5 < hi
    r = ratio_of_means([0.2, 0.25, 0.3], [0.6, 0.6, 0.6])
    assert r["value"] == pytest.approx(0.25 / 0.6) and r["lo"] <= r["value"] <= r["hi"]
    assert median_with_misses([10, None, 30]) == 30
    assert median_with_misses([10, None, None]) is None
    assert bootstrap(3, lambda i: None) == (None, None)


def test_doctests():
    assert doctest.testmod(curves).failed == 0


def test_t_interval_is_wider_than_the_bootstrap_at_three_seeds_and_reaches_the_worst_seed():
    from reinforce_ada.bench.curves import paired_factor

    f = paired_factor([3.08, 1.95, 3.35])  # the MoPPS seeds: the bootstrap excludes its own worst seed
    assert f["lo"] > 1.95 and f["t_lo"] < 1.95 < 3.35 < f["t_hi"]


def test_identical_arms_are_flagged():
    from reinforce_ada.bench.analysis import identical_arms

    run = {"accuracy": [0.1, 0.2], "eval_tokens": [0, 10]}
    arms = {"a": {0: run, 1: run}, "b": {0: dict(run), 1: dict(run)}, "c": {0: {**run, "accuracy": [0.1, 0.3]}}}
    assert identical_arms(arms) == {"a": ["b"], "b": ["a"]}


# -- speed bench ------------------------------------------------------------------------------------------------------
# benchmarks/speed.py: the P6 measurement on a tiny random model, token counting, argument errors, TRL's P5 side.
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "speed.py"


@pytest.fixture(scope="module")
def speed():
    return importlib.import_module("benchmarks.speed")


def test_real_tokens_counts_through_first_eos(speed):
    eos = 1
    ids = torch.tensor([[5, 6, eos, 0], [5, eos, 0, 0], [5, 6, 7, 8], [eos, 0, 0, 0]])
    assert harness.real_tokens(ids, [eos]) == 3 + 2 + 4 + 1
    assert harness.real_tokens(ids[:, :0], [eos]) == 0


@pytest.mark.slow
def test_measure_generation_reports_both_sides(speed, tiny_llama, char_tokenizer):
    prompts = [Prompt(f"p{i}", f"<bos>{i}+{i + 1}=") for i in range(3)]
    was_training = tiny_llama.training
    res = speed.measure_generation(tiny_llama, char_tokenizer, prompts, samples=2, max_new_tokens=4, repeats=1)
    assert tiny_llama.training == was_training
    assert res["rows"] == 6 and res["ratio_tokens_per_s"] > 0
    for side in ("engine", "generate"):
        r = res[side]
        for key in ("tokens_per_s", "seconds_median", "peak_rss_mib", "tokens_per_row_mean"):
            assert r[key] > 0, (side, key)
        assert r["peak_rss_delta_mib"] >= 0
        assert len(r["tokens_all"]) == 1 and 6 <= r["tokens_all"][0] <= 6 * 4


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--repeats", "-1"], ["--wait-idle", "-5"], ["--bogus"]])
def test_bad_arguments_exit_nonzero(speed, argv, capsys):
    with pytest.raises(SystemExit) as e:
        speed.parse_args(argv)
    assert e.value.code != 0
    assert "error" in capsys.readouterr().err


def test_trl_reward_is_our_verifier(speed):
    assert speed.arithmetic_reward(["579", " 57", "579<eos>"], ["579", "579", "579"]) == [1.0, 0.0, 1.0]


@pytest.mark.slow
def test_trl_step_runs_on_the_tiny_model(speed, tmp_path, char_tokenizer, tiny_llama):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    tiny_llama.save_pretrained(tmp_path)
    char_tokenizer.save_pretrained(tmp_path)
    prompts = [Prompt(f"p{i}", f"<bos>{i}+{i}=", answer=str(2 * i)) for i in range(16)]
    s = speed.Settings(batch_prompts=2, group=2, max_new_tokens=3, warmup_steps=1, steps=2, rounds=1, threads=1)
    r = speed.trl_steps(s, tmp_path, prompts)
    assert len(r["step_s"]) == 2 and all(t > 0 for t in r["step_s"])
    assert len(r["generate_s"]) == 2 and all(0 < g < t for g, t in zip(r["generate_s"], r["step_s"], strict=True))
