"""The built-in pools of `reinforce-ada compare` (issue 22): `small` and `mixed` parse, build on the shipped warm
start and have the shape their docstring promises; the `drop` band and exact-rate selection behave as documented."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada.bench.testbed import BUILTIN_POOLS, _filter, build_pool, parse_pool, with_size
from reinforce_ada.errors import ConfigError
from reinforce_ada.training.warm_start import SHIPPED_DIR


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
