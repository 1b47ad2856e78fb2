"""A third seed set read against a re-run and its first run (tiebreak): closed-form curves."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.bench import compute
from studies.compute_to_target import tiebreak as tb
from studies.compute_to_target.study import REGISTRATIONS
from tests.test_compute import record

REG = """version = 1
pool = "p"
seeds = [200, 201, 202]
arms = ["ref", "a"]
runs = ["first.json", "rerun.json"]
result = "third.json"

[[cell]]
arm = "a"
axis = "tokens"
reference = "ref"

[[cell]]
arm = "a"
axis = "cpu_s"
reference = "ref"

[rule]
level = 0.90
"""


def _result(folder, name, seeds, a_tokens, *, a_sec=0.1, noise=0.004):
    """A result JSON as compare writes it: runs without per-step times, their cumulative seconds stored (written,
    and returned as the tie-break reads it: (file name, result))."""
    runs = []
    for arm, tokens, sec in (("ref", 100.0, 0.1), ("a", a_tokens, a_sec)):
        for s in seeds:
            r = record(arm, s, tokens=tokens, sec=sec, noise=noise)
            r["eval_cpu_s"] = compute.axis_x(r, "cpu_s")
            del r["time_step_s"]
            runs.append({**r, "pool": "p"})
    (folder / name).write_text(json.dumps({"runs": {"main": runs}}))
    return name, json.loads((folder / name).read_text())


def _reg(folder, text=REG):
    (folder / "tb.toml").write_text(text)
    return tb.load_tiebreak(folder / "tb.toml")


@pytest.mark.parametrize(
    ("first", "second", "third", "reading"),
    [
        ((0.2, 0.4), (0.35, 0.6), (0.3, 0.5), "between"),  # overlaps both: the runs bracket it
        ((0.2, 0.3), (0.4, 0.6), (0.45, 0.5), "first"),  # sides with the re-run: the first run is unusual
        ((0.2, 0.3), (0.4, 0.6), (0.25, 0.35), "second"),  # sides with the first run: the re-run is unusual
        ((0.2, 0.3), (0.4, 0.6), (0.7, 0.8), "neither"),
    ],
)
def test_the_rule_names_the_unusual_run(first, second, third, reading):
    assert tb.bracket(third, first, second) == reading


def test_a_results_json_run_reads_its_stored_seconds():
    r = record("a", 0, sec=0.5)
    slim = {k: v for k, v in r.items() if k != "time_step_s"} | {"eval_cpu_s": [1.0, 2.0] + [3.0] * 19}
    assert compute.axis_x(slim, "cpu_s")[:3] == [1.0, 2.0, 3.0]
    assert compute.axis_x(r | {"eval_cpu_s": [9.0] * 21}, "cpu_s")[:2] == pytest.approx([0.0, 5.0])  # step times win


def test_three_runs_are_read_against_the_registered_reference(tmp_path):
    first = _result(tmp_path, "first.json", range(0, 3), 200.0)  # a needs 2x the tokens: factor 0.5
    second = _result(tmp_path, "rerun.json", range(100, 103), 400.0)  # factor 0.25: the re-run moved
    third = _result(tmp_path, "third.json", range(200, 203), 200.0)  # the third set sides with the first run
    reg = _reg(tmp_path)
    assert tb.result_names(reg) == ["first", "rerun", "third"]
    out = tb.tiebreak(reg, [first, second, third])
    tokens, cpu = out["cells"]
    assert [r["value"] for r in tokens["runs"]] == pytest.approx([0.5, 0.25, 0.5], rel=0.03)
    assert tokens["reading"] == "second"
    assert tokens["pooled"]["value"] == pytest.approx((0.5 * 0.25 * 0.5) ** (1 / 3), rel=0.03)
    assert tokens["pooled"]["seeds"] == 9 and tokens["pooled"]["after_the_fact"]
    assert cpu["reading"] == "between" and cpu["runs"][2]["value"] == pytest.approx(1.0, rel=0.03)
    stored = json.loads(json.dumps(out))  # what `regenerate` stores under the third set's `tiebreak`
    assert stored["cells"][0]["reading"] == "second" and stored["seeds"] == [200, 201, 202]
    table = tb.tiebreak_table(out)
    assert "the re-run is unusual" in table and "a / tokens vs ref" in table and "(9 seeds)" in table


def test_bad_registrations_and_missing_runs_are_named(tmp_path):
    with pytest.raises(SystemExit, match="unknown keys \\['colour'\\]"):
        _reg(tmp_path, REG.replace('pool = "p"', 'pool = "p"\ncolour = "red"'))
    with pytest.raises(SystemExit, match="cell 0 must have arm, axis"):
        _reg(tmp_path, REG.replace('axis = "tokens"', 'axis = "joules"', 1))
    with pytest.raises(SystemExit, match="cell 1 names an arm not in arms"):
        _reg(tmp_path, REG.replace('reference = "ref"\n\n[rule]', 'reference = "other"\n\n[rule]'))
    with pytest.raises(SystemExit, match="level must be 0.90"):
        _reg(tmp_path, REG.replace("level = 0.90", "level = 0.95"))
    with pytest.raises(SystemExit, match="runs must list"):
        _reg(tmp_path, REG.replace('runs = ["first.json", "rerun.json"]', 'runs = ["first.json"]'))
    reg = _reg(tmp_path)
    with pytest.raises(SystemExit, match="run the registered command first"):
        tb.tiebreak(reg, [("first.json", None), ("rerun.json", None), ("third.json", None)])
    first = _result(tmp_path, "first.json", range(3), 200.0)
    second = _result(tmp_path, "rerun.json", range(3), 200.0)
    with pytest.raises(SystemExit, match="no main runs of arm 'a'"):
        tb.tiebreak(reg, [first, second, ("third.json", {"runs": {"main": []}})])


def test_the_committed_registration_loads():
    reg = tb.load_tiebreak(REGISTRATIONS / "preregistration_tiebreak_mixed.toml")
    assert reg["pool"] == "mixed" and len(reg["cell"]) == 3 and set(reg["seeds"]).isdisjoint(range(0, 109))
