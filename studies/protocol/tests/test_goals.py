"""The goals P1-P4 from synthetic runs with known factors, the agreement of two runs, and C0-C3's names for the
package's compute-to-target headline (protocol.goals, protocol.headlines)."""

from __future__ import annotations

import pytest

from reinforce_ada.bench import analysis, compute
from studies.protocol.goals import agreement, format_agreement
from studies.protocol.goals import goals as study_goals
from studies.protocol.headlines import figures
from tests.test_compare import record
from tests.test_compute import UNIFORM, pool


def test_goals_from_synthetic_runs_with_known_factors():
    recs = []
    for s in range(5):
        recs += [
            record("grpo-n4", s, 1.0, 400, 100, 0.6 + 0.01 * s, 0.05),
            record("seq-bal", s, 2.0, 200, 500, 0.12, 0.1),
            record("grpo-matched", s, 1.6, 200, 500, 0.3, 0.2),
        ]
    summ = analysis.summarize_pool(recs, "grpo-n4", "grpo-matched", 200)
    goals = study_goals(recs, summ, "grpo-n4", "grpo-matched", "seq-bal", 200)
    assert goals["P1"]["value"] == pytest.approx(2.0, rel=0.02)
    assert goals["P2"]["value"] == pytest.approx(1.25, rel=0.02)
    assert goals["P2b"]["value"] == pytest.approx(0.4, rel=0.02)
    assert goals["P3"]["value"] == pytest.approx(0.12 / 0.62) and goals["P3"]["lo"] <= goals["P3"]["value"]
    assert goals["P4"]["value"] == pytest.approx(2.0)


def test_agreement_between_two_runs():
    def res(p1, p3):
        return {"by_pool": {"default": {"goals": {"P1": p1, "P3": p3, "P2": {"value": None}}}}}

    a = res({"value": 2.0, "lo": 1.8, "hi": 2.2}, {"value": 0.5, "lo": 0.45, "hi": 0.55})
    b = res({"value": 2.1, "lo": 1.9, "hi": 2.4}, {"value": 0.7, "lo": 0.65, "hi": 0.75})
    agree = agreement(a, b)["default"]
    assert set(agree) == {"P1", "P3"}
    assert agree["P1"]["overlap"] and agree["P1"]["second_in_first"] and agree["P1"]["first_in_second"]
    assert agree["P3"]["overlap"] is False and "DISJOINT" in format_agreement({"default": agree})


def test_a_rerun_is_checked_against_the_first_on_the_compute_headlines():
    def res(value, lo, hi):
        head = {"C1": {"value": value, "t_lo": lo, "t_hi": hi, "lo": value, "hi": value}}
        return {"by_pool": {"hard": {"goals": {}}}, "compute": {"by_pool": {"hard": head}}}

    agree = agreement(res(1.2, 1.0, 1.4), res(1.3, 1.1, 1.5))["hard"]["C1"]
    assert agree["overlap"] and agree["second_in_first"] and agree["first_in_second"]
    apart = agreement(res(1.2, 1.1, 1.3), res(2.0, 1.8, 2.2))["hard"]["C1"]
    assert apart["overlap"] is False and not apart["second_in_first"]


def test_the_registrations_name_the_packages_headline_figures():
    recs = pool({"grpo-n4": {"steps": 400}, "arm": {"tokens": 50.0}, "oracle-both": {"tokens": 100 / 3}})
    out = compute.summarize(recs, [], UNIFORM, ("oracle-select", "oracle-both"), axes=("tokens",))
    heads = figures(out, "arm")
    assert heads["C0"]["value"] == pytest.approx(3.0, rel=1e-5)
    assert heads["C1"]["value"] == pytest.approx(2.0, rel=1e-5)
    assert heads["C3"]["value"] == pytest.approx(0.5, rel=1e-5)
