"""Re-run agreement statistics (agreement): interval counts, chances under seed noise, the joint null."""

from __future__ import annotations

import numpy as np

from reinforce_ada.bench import curves
from studies.compute_to_target.agreement import chance_apart, joint_null, noise_quantile, rerun_agreement


def test_agreement_counts_overlapping_intervals_and_reports_what_differs():
    def pool(table, best="grpo-n4"):
        return {"axes": {"tokens": {"best_uniform": best}}, "table": table}

    first = pool(
        {
            "a": {"tokens": {"value": 1.0, "t_lo": 0.9, "t_hi": 1.1}},
            "b": {"tokens": {"value": 2.0, "t_lo": 1.8, "t_hi": 2.2}},
            "gone": {"tokens": {"value": 1.0, "t_lo": 0.9, "t_hi": 1.1}},
        }
    )
    second = pool(
        {
            "a": {"tokens": {"value": 1.05, "t_lo": 0.95, "t_hi": 1.15}},  # inside and overlapping
            "b": {"tokens": {"value": 1.5, "t_lo": 1.4, "t_hi": 1.6}},  # disjoint
            "new": {"tokens": {"value": 1.0, "t_lo": None, "t_hi": None}},
        },
        best="grpo-n8",
    )
    out = rerun_agreement(first, second, axes=("tokens",))
    assert out["counts"] == {
        "cells": 2,
        "overlap": 1,
        "inside": 1,
        "expected_apart_if_same": None,
        "expected_inside_if_same": None,
    }  # no per_seed
    assert out["arms"]["a"]["tokens"]["inside"] and not out["arms"]["b"]["tokens"]["overlap"]
    assert out["arms"]["b"]["tokens"]["first"] == [2.0, 1.8, 2.2] and out["arms"]["b"]["tokens"]["rerun"][0] == 1.5
    assert out["missing_arms"] == ["gone", "new"]
    assert out["best_uniform"] == {"tokens": ["grpo-n4", "grpo-n8"]}


def test_chance_apart_matches_independent_runs_of_the_same_thing():
    """Closed-form-free check by simulation: two independent 9-seed runs of one normal log factor have their 90%
    t-intervals apart about 2% of the time; the permutation estimate averages to the same rate."""
    rng = np.random.default_rng(3)
    runs = [(np.exp(rng.normal(size=9)), np.exp(rng.normal(size=9))) for _ in range(150)]
    chances = [chance_apart(list(a), list(b), draws=400) for a, b in runs]
    assert 0.01 < np.mean([c["p_apart_if_same"] for c in chances]) < 0.035
    # inside: |mean2 - mean1| < t(8) s / 3 with var(mean2 - mean1) = 2 s^2 / 9: P(|Z| < 1.86 / sqrt 2) ~ 0.81
    assert 0.76 < np.mean([c["p_inside_if_same"] for c in chances]) < 0.86
    same = [1.1, 0.9, 1.3, 0.8, 1.0]
    assert chance_apart(same, same) == chance_apart(same, same)  # deterministic
    none = {"p_apart_if_same": None, "p_inside_if_same": None}
    assert chance_apart([1.0], [1.0, 2.0]) == none and chance_apart([None, 1.0, -1.0], same) == none
    # far-apart runs: the pooled values are wide, so a random split is rarely apart; the reading is about noise only
    assert chance_apart([0.5] * 4 + [0.6] * 5, [2.0] * 4 + [2.2] * 5)["p_apart_if_same"] < 0.2


def _runs_with_a_shared_reference(rng, arms=30, shift=None, link=1.0):
    """Two 9-seed runs of per-seed factors arm / reference: each seed's reference noise (scaled by `link`) enters
    every arm's factor of that seed, as the shared reference runs do in `summarize`."""

    def one():
        ref = rng.normal(scale=link, size=9)
        return {
            f"a{i}": {"tokens": _cell(np.exp(rng.normal(scale=0.3, size=9) - ref) * (shift or {}).get(f"a{i}", 1.0))}
            for i in range(arms)
        }

    return one(), one()


def _cell(vals):
    lo, hi = curves.t_interval(vals)
    return {"value": curves.geo_mean(vals), "t_lo": lo, "t_hi": hi, "per_seed": [float(v) for v in vals]}


def test_joint_null_keeps_the_links_between_cells():
    """Cells that share each seed's reference noise are apart together: shuffling whole seeds gives a wider count than
    cells read one at a time (the Poisson-binomial bound) with the same mean, and more draws with none apart; with
    independent cells the two readings agree."""

    def both(link, seed):
        first, second = _runs_with_a_shared_reference(np.random.default_rng(seed), link=link)
        agree = rerun_agreement({"axes": {}, "table": first}, {"axes": {}, "table": second}, ("tokens",))
        return joint_null(first, second, claimed=["a0"], draws=400), [
            c["tokens"]["p_apart_if_same"] for c in agree["arms"].values()
        ]

    j, independent = both(0.3, 0)
    assert j["distinct_cells"] == 30 and j["not_preregistered"]
    assert abs(j["apart_mean"] - sum(independent)) < 0.3
    assert j["apart_quantile"] > noise_quantile(independent, 0.95)
    assert j["p_none_apart"] > np.exp(-sum(independent)) + 0.05
    assert 0 <= j["p_registered_passes"] <= j["p_none_apart"] <= 1
    j, independent = both(0.0, 1)
    assert j["apart_quantile"] <= noise_quantile(independent, 0.95)
    assert abs(j["p_none_apart"] - np.exp(-sum(independent))) < 0.1


def test_joint_null_tests_a_claimed_arm_for_a_shift():
    rng = np.random.default_rng(2)
    first, second = _runs_with_a_shared_reference(rng, arms=4, link=0.0)
    moved = {**second, "a1": {"tokens": _cell(np.array(second["a1"]["tokens"]["per_seed"]) * 3.0)}}
    j = joint_null(first, moved, claimed=["a0"], shift_arms=["a1"], draws=500)
    assert j["claimed_shift_p"]["a1"] < 0.01 and j["claimed_shift_p"]["a0"] > 0.01
    twin = {**moved, "a1-twin": moved["a1"]}  # an identical arm shares the cell; its name still gets its p
    j = joint_null({**first, "a1-twin": first["a1"]}, twin, shift_arms=["a1-twin"], draws=200)
    assert j["claimed_shift_p"]["a1-twin"] < 0.01 and j["distinct_cells"] == 4
    assert joint_null({"x": {"tokens": {"value": 1.0}}}, {"x": {"tokens": {"value": 1.0}}}) is None
