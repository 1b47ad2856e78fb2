"""The testbed's factors beside the real model's (benchmarks/llm_testbed.py): closed-form curves, bad input."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import llm_convergence, llm_testbed
from tests.test_compute import record


def _records(arm_tokens, seeds=(0, 1, 2), run=0, pool="p"):
    out = []
    for arm, tokens in (("grpo-n4", 100.0), *arm_tokens.items()):
        out += [{**record(arm, s, tokens=tokens), "pool": pool, "_run": run} for s in seeds]
    return out


def test_a_rescaled_curve_reads_its_scale_and_runs_never_pair_across():
    # run 0: mopps spends half GRPO-n4's tokens (factor 2); run 1, same seed numbers: twice (factor 0.5)
    recs = _records({"mopps": 50.0}, run=0) + _records({"mopps": 200.0}, run=1)
    one = llm_testbed.testbed_factors({"p": _records({"mopps": 50.0})}, ["mopps"])["p"]["mopps"]
    assert one["value"] == pytest.approx(2.0, rel=1e-3) and one["seeds"] == 3
    both = llm_testbed.testbed_factors({"p": recs}, ["mopps", "absent"])["p"]
    assert both["mopps"]["seeds"] == 6  # keyed by (run, seed): seed 0 of each run pairs with its own GRPO-n4
    assert both["mopps"]["value"] == pytest.approx(1.0, rel=1e-3)  # geometric mean of 2 and 0.5
    assert "absent" not in both


def test_a_pool_without_the_reference_is_named():
    recs = [r for r in _records({"mopps": 50.0}) if r["arm"] != "grpo-n4"]
    with pytest.raises(ValueError, match="pool 'p'.*grpo-n4"):
        llm_testbed.testbed_factors({"p": recs}, ["mopps"])


def test_load_reads_both_runs_of_a_pool_and_lists_what_is_missing(tmp_path):
    main = _records({"seq-bal": 200.0}, pool="small") + _records({"seq-bal": 1.0}, pool="other")
    (tmp_path / "compute_to_target_small.json").write_text(json.dumps({"runs": {"main": main}}))
    tb = llm_testbed.load_testbed(["seq-bal"], tmp_path, pools=("small", "hard"))
    assert set(tb["factors"]) == {"small"}  # a pool with neither file is left out; other pools' rows are ignored
    assert tb["factors"]["small"]["seq-bal"]["value"] == pytest.approx(0.5, rel=1e-3)
    assert tb["missing"] == [
        "compute_to_target_small_rerun.json",
        "compute_to_target_hard.json",
        "compute_to_target_hard_rerun.json",
    ]


@pytest.mark.parametrize(
    ("real", "testbed", "want"),
    [
        ((0.9, 1.3), (1.2, 1.5), "agrees"),
        ((1.6, 2.0), (0.7, 0.9), "real model higher"),
        ((0.3, 0.4), (0.7, 0.9), "real model lower"),
        ((None, None), (0.7, 0.9), None),
    ],
)
def test_reading_of_two_intervals(real, testbed, want):
    f = lambda iv: {"t_lo": iv[0], "t_hi": iv[1]}  # noqa: E731
    assert llm_testbed.reading(f(real), f(testbed)) == want


def _analysis():
    return {
        "table": {
            "grpo-n4": {},
            "mopps": {"tokens": {"value": 1.2, "t_lo": 1.0, "t_hi": 1.4}},
            "seq-bal": {"tokens": {"value": 0.5, "t_lo": 0.4, "t_hi": 0.6}},
            "grpo-matched": {"tokens": {"value": None}},
        }
    }


def test_compare_reads_every_arm_and_pool_and_says_where_the_order_differs():
    f = lambda v, lo, hi: {"value": v, "t_lo": lo, "t_hi": hi, "seeds": 18}  # noqa: E731
    tb = {
        "factors": {
            "small": {"mopps": f(0.8, 0.75, 0.87), "seq-bal": f(0.3, 0.27, 0.32), "grpo-matched": f(0.33, 0.3, 0.35)},
            "hard": {"mopps": f(1.3, 1.2, 1.5), "seq-bal": f(0.5, 0.45, 0.55)},
        },
        "missing": ["compute_to_target_hard_rerun.json"],
    }
    cmp = llm_testbed.compare(_analysis(), tb)
    assert cmp["rows"]["mopps"]["testbed"]["small"]["reading"] == "real model higher"
    assert cmp["rows"]["mopps"]["testbed"]["hard"]["reading"] == "agrees"
    assert cmp["rows"]["seq-bal"]["testbed"]["small"]["reading"] == "real model higher"
    assert cmp["rows"]["grpo-matched"]["testbed"]["small"]["reading"] is None  # unread on SmolLM2
    assert "hard" not in cmp["rows"]["grpo-matched"]["testbed"]  # not run on that pool
    assert cmp["orders"]["small"] == {
        "testbed": ["grpo-n4", "mopps", "grpo-matched", "seq-bal"],
        "real": ["mopps", "grpo-n4", "seq-bal"],
        "same": False,
    }
    assert cmp["orders"]["hard"]["same"] is True  # mopps > grpo-n4 > seq-bal on both
    assert cmp["missing"] == ["compute_to_target_hard_rerun.json"]
    md = llm_testbed.markdown(cmp)
    assert "| mopps | 1.20 [1.00, 1.40] | 0.80 [0.75, 0.87]: real model higher | 1.30 [1.20, 1.50]: agrees |" in md
    assert "| grpo-matched | — | 0.33 [0.30, 0.35]: unread | — |" in md
    assert "- `small`: grpo-n4 > mopps > grpo-matched > seq-bal; SmolLM2: mopps > grpo-n4 > seq-bal (a different" in md


def test_the_study_reports_an_unreadable_testbed_and_goes_on(tmp_path, monkeypatch):
    (tmp_path / "compute_to_target_small.json").write_text(json.dumps({"runs": {"main": [{"pool": "small"}]}}))
    monkeypatch.setattr(llm_testbed, "RESULTS", tmp_path)
    out = llm_convergence.testbed_comparison(_analysis())
    assert "could not be read" in out["error"] and "'arm'" in out["error"]
    monkeypatch.setattr(llm_testbed, "RESULTS", tmp_path / "none")
    empty = llm_convergence.testbed_comparison(_analysis())
    assert empty["rows"]["mopps"]["testbed"] == {} and len(empty["missing"]) == 8
    assert not math.isnan(empty["rows"]["mopps"]["real"]["value"])
