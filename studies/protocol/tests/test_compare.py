"""`reinforce-ada compare` with the study protocol on top (protocol.compare): the three study flags; the goals P1-P4
from synthetic runs with known factors, the agreement of two runs, and C0-C3's names for the package's
compute-to-target headline (protocol.goals, protocol.headlines)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reinforce_ada.bench import analysis, compute
from studies.protocol.compare import main as study_compare
from studies.protocol.goals import agreement, format_agreement
from studies.protocol.goals import goals as study_goals
from studies.protocol.headlines import figures
from tests.test_compare import three_arms
from tests.test_compute import UNIFORM, pool


def test_the_study_flags_reject_bad_input(capsys):
    for argv, msg in (
        (["--check-against", "nowhere.json"], "no such"),
        (["--preregistration", "nowhere.toml"], "does not exist"),
        (["--report-only", "--fingerprint-of", "/nonexistent"], "--fingerprint-of"),
        (["--arms", "grpo-n4,ppo"], "ppo"),  # the package's flags are checked as the package checks them
    ):
        with pytest.raises(SystemExit) as e:
            study_compare(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err


def test_check_against_a_file_that_is_not_utf8_is_one_line_and_writes_nothing(tmp_path, capsys):
    """Moved from the package CLI's adversarial corpus (tests/adversarial/cli): --check-against a UTF-16 file was a
    UnicodeDecodeError traceback."""
    (tmp_path / "first.json").write_bytes("{}".encode("utf-16"))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as e:
        study_compare(["--check-against", str(tmp_path / "first.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert re.search("--check-against .*first.json: not UTF-8 text", err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # failed before writing anything


def test_the_package_command_has_no_study_flags(capsys):
    from reinforce_ada.cli import main

    for flag in ("--check-against", "--preregistration", "--fingerprint-of"):
        with pytest.raises(SystemExit) as e:
            main(["compare", flag, "x"])
        assert e.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_end_to_end_with_a_preregistration_and_resumable_records(tmp_path, monkeypatch):
    import gzip
    import subprocess

    monkeypatch.chdir(tmp_path)  # the run's pools and run folders go under runs/compare of the working directory

    from reinforce_ada.bench.compute import TARGETS

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    reg = tmp_path / "prereg.toml"
    reg.write_text(
        f'version = 1\n[instrument]\npools = ["small"]\nseeds = [0, 1]\nsteps = 4\ntargets = {list(TARGETS)}\n'
        'uniform = ["grpo-n2", "grpo-n4"]\noracles = ["oracle-select"]\n'
        '[[claim]]\nfigure = "C1"\narm = "oracle-select"\n[[claim]]\nfigure = "C0"\narm = "oracle"\n'
    )
    git("add", "prereg.toml")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "prereg")
    argv = ["--arms", "grpo-n4,grpo-n2,oracle-select", "--pool", "small", "--steps", "4"]
    argv += ["--seeds", "2", "--other-seeds", "2", "--sweep-seeds", "1", "--lrs", "2e-4", "--sweep-each-pool"]
    argv += ["--preregistration", str(reg), "--records", str(tmp_path / "rec"), "--out", str(tmp_path / "out")]
    argv += ["--long-arms", "grpo-n4,grpo-n2"]
    assert study_compare(argv) == 0
    res = json.loads((tmp_path / "out.json").read_text())
    heads = res["compute"]["by_pool"]["small"]
    assert heads["C1"]["arm"] == "oracle-select" and heads["C1"]["preregistration"]["preregistered"]
    assert heads["C0"]["preregistration"]["preregistered"]
    assert not heads["C2"]["preregistration"]["preregistered"]  # registered for no arm
    assert res["compute"]["preregistration"]["committed"]
    runs = res["runs"]["main"]
    assert {r["steps"] for r in runs if r["arm"] == "grpo-n2"} == {8} and "time_step_s" not in runs[0]
    assert len(runs[0]["eval_gpu_s"]) == len(runs[0]["eval_step"])
    records = sorted((tmp_path / "rec").glob("*.json.gz"))
    assert len(records) == 3 + 6  # sweep: 3 arms x 1 lr x 1 seed; main: 3 arms x 2 seeds
    with gzip.open(records[0], "rt") as f:
        assert "accuracy" in json.load(f)
    assert study_compare(argv) == 0  # a second run reuses every record
    # a report on a run not finished: run nothing, read what the records hold (here: one main run removed)
    newest = max((tmp_path / "rec").glob("*.json.gz"), key=lambda f: f.stat().st_mtime)
    newest.unlink()
    src = Path(__file__).resolve().parents[3] / "src" / "reinforce_ada"
    assert study_compare([*argv, "--report-only", "--fingerprint-of", str(src)]) == 0
    part = json.loads((tmp_path / "out.json").read_text())
    assert len(part["runs"]["main"]) == 5 and not (tmp_path / "rec" / newest.name).exists()


def test_goals_from_synthetic_runs_with_known_factors():
    recs = three_arms()
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
