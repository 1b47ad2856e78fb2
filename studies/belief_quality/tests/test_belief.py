"""The belief-quality replay (`belief`); the prompt features it reads: tests/test_features_column.py."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.bench.arms import ARMS
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.types import Prompt
from studies.belief_quality.belief import gain_share, p_signal, replay_draw, spearman, within_level_probe

CFG = parse_arm(ARMS["signal-draw"])


def _pool(rates):
    return [Prompt(id=f"p{i}", text=f"{i}+{i}=", level=1 + i % 3) for i in range(len(rates))]


def test_p_signal_closed_form():
    assert p_signal(np.array([0.0, 1.0, 0.5]), 4).tolist() == [0.0, 0.0, 1 - 2 / 16]


def test_spearman_matches_known_values_and_ties():
    assert spearman(np.arange(5), np.arange(5) ** 3) == pytest.approx(1.0)
    assert spearman(np.arange(5), -np.arange(5)) == pytest.approx(-1.0)
    assert np.isnan(spearman(np.ones(4), np.arange(4)))
    # ties get average ranks: [1, 1, 2] ranks as [0.5, 0.5, 2]
    assert spearman(np.array([1, 1, 2]), np.array([0, 1, 2])) == pytest.approx(np.sqrt(3) / 2)


def test_gain_share():
    assert gain_share(0.4, 0.3, 0.5) == pytest.approx(0.5)
    assert np.isnan(gain_share(0.4, 0.3, 0.3))


def test_equal_rates_make_admission_uniform():
    rates = np.full(200, 0.3)
    run = replay_draw(_pool(rates), rates, CFG.replace(estimator="oracle"), steps=10, batch=8, n=4, seed=0)
    assert np.allclose(run.admitted_signal, p_signal(np.array(0.3), 4))
    assert np.allclose(run.admitted_signal, run.candidate_signal)
    assert np.all(np.isnan(run.spearman))  # a constant belief has no ranks


def test_oracle_admits_more_signal_than_uniform_and_is_deterministic():
    rng = np.random.default_rng(0)
    rates = np.where(rng.random(600) < 0.6, rng.choice([0.0, 1.0], 600), 0.5)
    pool = _pool(rates)
    cfg = CFG.replace(estimator="oracle")
    a = replay_draw(pool, rates, cfg, steps=30, batch=8, n=4, seed=1)
    b = replay_draw(pool, rates, cfg, steps=30, batch=8, n=4, seed=1)
    assert np.array_equal(a.admitted_signal, b.admitted_signal)
    assert a.admitted_signal.mean() > a.candidate_signal.mean() + 0.2
    assert np.nanmean(a.spearman) == pytest.approx(1.0)
    # the learned belief starts at the prior and must learn from visits: below the oracle
    learned = replay_draw(pool, rates, CFG, steps=30, batch=8, n=4, seed=1)
    assert learned.admitted_signal.mean() < a.admitted_signal.mean()
    # an oracle fed other rates (here: the same for every prompt) admits uniformly
    flat = replay_draw(pool, rates, cfg, steps=30, batch=8, n=4, seed=1, oracle_rates=np.full(600, 0.5))
    assert np.allclose(flat.admitted_signal.mean(), flat.candidate_signal.mean(), atol=0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rates": np.full(3, 0.5)}, "one rate per prompt"),
        ({"rates": np.full(4, 1.5)}, r"\[0, 1\]"),
        ({"cfg": CFG.replace(select="mopps")}, "select=iw"),
        ({"steps": 0}, ">= 1"),
        ({"oracle_rates": np.full(3, 0.5)}, "oracle_rates"),
    ],
)
def test_replay_draw_rejects_bad_input(kwargs, match):
    args = {"rates": np.full(4, 0.5), "cfg": CFG, "steps": 2}
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        replay_draw(
            _pool(np.zeros(4)),
            args["rates"],
            args["cfg"],
            steps=args["steps"],
            batch=2,
            n=4,
            seed=0,
            oracle_rates=args.get("oracle_rates"),
        )


def test_within_level_probe_finds_a_feature_that_carries_the_rate_and_not_noise():
    rng = np.random.default_rng(0)
    levels = np.repeat([1, 2], 400)
    logit = rng.normal(size=800) + np.where(levels == 1, 2.0, -2.0)
    rates = 1 / (1 + np.exp(-logit))
    informative = np.column_stack([logit + 0.1 * rng.normal(size=800), rng.normal(size=800)])
    noise = rng.normal(size=(800, 2))
    good = within_level_probe(informative, rates, levels.tolist())
    bad = within_level_probe(noise, rates, levels.tolist())
    assert good["L1"] > 0.9 and good["L2"] > 0.9 and good["mean"] > 0.9
    assert abs(bad["mean"]) < 0.15
    # a level too small to split is left out, not scored on a handful of prompts
    few = within_level_probe(informative[:420], rates[:420], levels[:420].tolist())
    assert "L2" not in few and "L1" in few
    with pytest.raises(ConfigError, match="one feature row"):
        within_level_probe(noise[:5], rates, levels.tolist())
