"""The testbed's factors beside the real model's (testbed): pooled committed factors, readings,
reversed orders, bad input."""

from __future__ import annotations

import json
import math

import pytest

from studies.llm_convergence import regenerate as llm_convergence
from studies.llm_convergence import testbed as llm_testbed


def _table(**per_seed):
    return {arm: {"k_tokens": {"per_seed": ks}} for arm, ks in per_seed.items()}


def test_runs_are_pooled_seed_by_seed_and_seeds_without_a_factor_are_counted():
    # first run: mopps spends half GRPO-n4's tokens (factor 2) on 3 seeds; re-run: twice (0.5), one seed undefined
    tables = {"p": [_table(mopps=[2.0, 2.0, 2.0]), _table(mopps=[0.5, 0.5, None, 0.5])]}
    f = llm_testbed.testbed_factors(tables, ["mopps", "absent"])["p"]
    assert f["mopps"]["value"] == pytest.approx(1.0)  # geometric mean of three 2s and three 0.5s
    assert (f["mopps"]["seeds"], f["mopps"]["undefined"]) == (6, 1)
    assert f["mopps"]["t_lo"] < 1.0 < f["mopps"]["t_hi"]
    assert "absent" not in f


def test_load_reads_both_runs_of_a_pool_and_lists_what_is_missing(tmp_path):
    first = {"by_pool": {"small": {"table": _table(**{"seq-bal": [0.5, 0.5, 0.5]})}}}
    (tmp_path / "compute_to_target_small.json").write_text(json.dumps(first))
    tb = llm_testbed.load_testbed(["seq-bal"], tmp_path, pools=("small", "hard"))
    assert set(tb["factors"]) == {"small"}  # a pool with neither file is left out
    assert tb["factors"]["small"]["seq-bal"]["value"] == pytest.approx(0.5)
    assert tb["missing"] == [
        "compute_to_target_small_rerun.json",
        "compute_to_target_hard.json",
        "compute_to_target_hard_rerun.json",
    ]
    (tmp_path / "compute_to_target_small_rerun.json").write_text(json.dumps({"by_pool": {"other": {}}}))
    with pytest.raises(ValueError, match=r"small_rerun.json: no by_pool\['small'\].table"):
        llm_testbed.load_testbed(["seq-bal"], tmp_path, pools=("small",))


def test_the_committed_testbed_reads_as_benchmarks_quotes_it():
    tb = llm_testbed.load_testbed(["mopps", "seq-bal", "grpo-matched"])
    assert tb["missing"] == [] and set(tb["factors"]) == set(llm_testbed.POOLS)
    for pool in llm_testbed.POOLS:
        assert all(f["seeds"] + f["undefined"] == 18 for f in tb["factors"][pool].values())
    only_first = json.loads((llm_testbed.RESULTS / "compute_to_target_mixed.json").read_text())["by_pool"]["mixed"]
    one = llm_testbed.testbed_factors({"mixed": [only_first["table"]]}, ["mopps"])["mixed"]["mopps"]
    assert one["value"] == pytest.approx(only_first["table"]["mopps"]["k_tokens"]["value"], abs=1e-3)


@pytest.mark.parametrize(
    ("real", "testbed", "want"),
    [
        ((0.9, 1.3), (1.2, 1.5), "intervals overlap"),
        ((1.6, 2.0), (0.7, 0.9), "real model higher"),
        ((0.3, 0.4), (0.7, 0.9), "real model lower"),
        ((None, None), (0.7, 0.9), None),
    ],
)
def test_reading_of_two_intervals(real, testbed, want):
    f = lambda iv: {"t_lo": iv[0], "t_hi": iv[1]}  # noqa: E731
    assert llm_testbed.reading(f(real), f(testbed)) == want


def _f(v, lo, hi):
    return {"value": v, "t_lo": lo, "t_hi": hi, "per_seed": [v] * 3}


def _analysis():
    return {
        "table": {
            "grpo-n4": {},
            "mopps": {"tokens": _f(1.5, 1.2, 1.8)},
            "seq-bal": {"tokens": {**_f(0.5, 0.4, 0.6), "per_seed": [0.5, None, 0.5]}},
            "grpo-matched": {"tokens": {"value": None}},
        }
    }


def test_compare_reads_every_arm_and_pool_and_reports_only_orders_reversed_outside_the_intervals():
    tb = {
        "factors": {
            "small": {
                "mopps": _f(0.8, 0.75, 0.87),
                "seq-bal": _f(0.3, 0.27, 0.32),
                "grpo-matched": _f(0.33, 0.3, 0.35),
            },
            "hard": {"mopps": _f(1.3, 0.95, 1.5), "seq-bal": _f(0.5, 0.45, 0.55)},
        },
        "missing": ["compute_to_target_hard_rerun.json"],
    }
    cmp = llm_testbed.compare(_analysis(), tb)
    assert cmp["rows"]["mopps"]["testbed"]["small"]["reading"] == "real model higher"
    assert cmp["rows"]["mopps"]["testbed"]["hard"]["reading"] == "intervals overlap"
    assert cmp["rows"]["seq-bal"]["real"]["seeds"] == 2 and cmp["rows"]["seq-bal"]["real"]["undefined"] == 1
    assert cmp["rows"]["grpo-matched"]["testbed"]["small"]["reading"] is None  # unread on SmolLM2
    assert "hard" not in cmp["rows"]["grpo-matched"]["testbed"]  # not run on that pool
    small = cmp["orders"]["small"]
    assert small["testbed"] == ["grpo-n4", "mopps", "grpo-matched", "seq-bal"]
    assert small["real"] == ["mopps", "grpo-n4", "seq-bal"]
    assert small["reversed"] == [["grpo-n4", "mopps"]]  # GRPO-n4 above MoPPS on the testbed, below on SmolLM2
    # on `hard` the points order MoPPS > GRPO-n4 on both sides; MoPPS's testbed interval holds 1: nothing reversed
    assert cmp["orders"]["hard"]["reversed"] == []
    assert cmp["missing"] == ["compute_to_target_hard_rerun.json"]
    md = llm_testbed.markdown(cmp)
    assert (
        "| mopps | 1.50 [1.20, 1.80] | 0.80 [0.75, 0.87]: real model higher | 1.30 [0.95, 1.50]: intervals overlap |"
        in md
    )
    assert "| grpo-matched | — | 0.33 [0.30, 0.35]: unread | — |" in md
    assert "grpo-n4 > mopps on the testbed, mopps > grpo-n4 on SmolLM2" in md
    assert "- `hard`: mopps > grpo-n4 > seq-bal; SmolLM2: mopps > grpo-n4 > seq-bal (no pair reversed" in md


def test_the_study_reports_an_unreadable_testbed_and_goes_on(tmp_path, monkeypatch):
    (tmp_path / "compute_to_target_small.json").write_text(json.dumps({"by_pool": {"small": {"table": None}}}))
    monkeypatch.setattr(llm_testbed, "RESULTS", tmp_path)
    assert "ValueError" in llm_convergence.testbed_comparison(_analysis())["error"]
    bad = {"by_pool": {"small": {"table": {"mopps": {"k_tokens": {"per_seed": None}}}}}}  # a TypeError inside
    (tmp_path / "compute_to_target_small.json").write_text(json.dumps(bad))
    assert "TypeError" in llm_convergence.testbed_comparison(_analysis())["error"]
    monkeypatch.setattr(llm_testbed, "RESULTS", tmp_path / "none")
    empty = llm_convergence.testbed_comparison(_analysis())
    assert empty["rows"]["mopps"]["testbed"] == {} and len(empty["missing"]) == 8
    assert not math.isnan(empty["rows"]["mopps"]["real"]["value"])
