"""The compute-to-target study's re-run (rerun: its first run, lrs and verdicts), registration tags, config and
tables (run, study, tables): synthetic results."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.bench import compute, curves
from reinforce_ada.errors import ConfigError
from studies.compute_to_target import rerun as compute_rerun
from studies.compute_to_target import run, study, tables
from studies.compute_to_target.agreement import rerun_agreement
from studies.compute_to_target.rerun import rerun_table
from tests.test_compute import pool


def _first_run_json(folder, name, prereg_path, pool="hard", lrs=None, table=None):
    data = {
        "preregistration_file": {"path": prereg_path},
        "lrs_by_pool": {pool: lrs or {"grpo-n4": 2e-4, "mopps": 1e-4}},
        "by_pool": {
            pool: {
                "compute": {
                    "axes": {"tokens": {"best_uniform": "grpo-n4"}},
                    "oracle": "oracle-alloc",
                    "table": table or {},
                }
            }
        },
    }
    (folder / name).write_text(json.dumps(data))
    return data


def test_a_rerun_reads_only_its_own_first_run_and_its_lrs(tmp_path):
    """The re-run mode (studies.compute_to_target.run): the first run is the JSON written under the registration
    the re-run names, never a `_rerun` file or another registration's; its per-pool lrs fix every arm, no sweep."""

    _first_run_json(tmp_path, "compute_to_target_hard_rerun.json", "/x/benchmarks/preregistration.toml")
    _first_run_json(tmp_path, "compute_to_target_hard.json", "/x/benchmarks/other.toml", lrs={"grpo-n4": 9.0})
    assert compute_rerun.first_run("hard", "benchmarks/preregistration.toml", tmp_path) is None
    with pytest.raises(SystemExit, match="no first run of pool 'hard'"):
        compute_rerun.rerun_fields("hard", "benchmarks/preregistration.toml", tmp_path)
    _first_run_json(tmp_path, "compute_to_target.json", "/y/benchmarks/preregistration.toml")
    path, _ = compute_rerun.first_run("hard", "benchmarks/preregistration.toml", tmp_path)
    assert path.name == "compute_to_target.json"
    assert compute_rerun.first_run("small", "benchmarks/preregistration.toml", tmp_path) is None
    fields = compute_rerun.rerun_fields("hard", "benchmarks/preregistration.toml", tmp_path)
    assert fields == {"fixed_lrs": (("grpo-n4", 2e-4), ("mopps", 1e-4)), "sweep_each_pool": False, "extend_sweep": 0}


def test_a_rerun_verdict_follows_the_registered_criterion(tmp_path):
    """Agrees when every interval overlaps and the claimed arms (and the oracle) fall inside the first intervals."""

    cell = {"value": 1.0, "t_lo": 0.9, "t_hi": 1.1}
    first = {"mopps": {"tokens": cell}, "oracle-alloc": {"tokens": cell}, "seq-bal": {"tokens": cell}}
    _first_run_json(tmp_path, "compute_to_target_hard.json", "benchmarks/preregistration.toml", table=first)
    reg = {"rerun_of": "benchmarks/preregistration.toml", "claim": [{"arm": "mopps"}, {"arm": "oracle"}]}

    def rerun(table):
        return {"by_pool": {"hard": {"compute": {"axes": {"tokens": {"best_uniform": "grpo-n4"}}, "table": table}}}}

    same = compute_rerun.agreement_with_first(rerun(first), reg, "hard", tmp_path)
    assert same["verdict"]["agrees"] and same["counts"] == {
        "cells": 3,
        "overlap": 3,
        "inside": 3,
        "expected_apart_if_same": None,
        "expected_inside_if_same": None,
    }
    shifted = {**first, "mopps": {"tokens": {"value": 1.15, "t_lo": 1.05, "t_hi": 1.25}}}  # overlaps, not inside
    out = compute_rerun.agreement_with_first(rerun(shifted), reg, "hard", tmp_path)
    assert not out["verdict"]["agrees"] and "mopps" in out["verdict"]["why"] and "apart" not in out["verdict"]["why"]
    apart = {**first, "seq-bal": {"tokens": {"value": 2.0, "t_lo": 1.8, "t_hi": 2.2}}}
    out = compute_rerun.agreement_with_first(rerun(apart), reg, "hard", tmp_path)
    assert not out["verdict"]["agrees"] and "seq-bal/tokens" in out["verdict"]["why"]


def test_the_amended_verdict_allows_what_seed_noise_explains(tmp_path):
    """[amended_agreement]: apart cells up to the noise quantile pass, identical arms count once, a claimed arm's
    tokens intervals must overlap, and the verdict says on which pools it was registered in advance."""

    seeds = [1.0, 1.1, 0.9, 1.2, 0.8, 1.05, 0.95, 1.15, 0.85]

    def cell(scale):
        vals = [v * scale for v in seeds]
        lo, hi = curves.t_interval(vals)
        return {"value": curves.geo_mean(vals), "t_lo": lo, "t_hi": hi, "per_seed": vals}

    arms = [f"arm{i}" for i in range(40)]
    first = {
        a: {"tokens": cell(1.0 + i / 1000)} for i, a in enumerate([*arms, "mopps", "oracle-alloc", "twin-a", "twin-b"])
    }
    _first_run_json(tmp_path, "compute_to_target_hard.json", "benchmarks/preregistration.toml", table=first)
    amend = {"written": "2026-12-04", "pools": ["small"], "level": 0.95}
    reg = {"rerun_of": "benchmarks/preregistration.toml", "claim": [{"arm": "mopps"}], "amended_agreement": amend}

    def rerun(table):
        return {"by_pool": {"hard": {"compute": {"axes": {"tokens": {"best_uniform": "grpo-n4"}}, "table": table}}}}

    # one arm apart among 44 cells: the strict verdict fails, seed noise explains one (P(apart) ~ 0.02 per cell)
    one = {**first, "arm0": {"tokens": cell(1.5)}}
    out = compute_rerun.agreement_with_first(rerun(one), reg, "hard", tmp_path)
    amended = out["verdict_amended"]
    assert not out["verdict"]["agrees"] and amended["agrees"], amended
    assert amended["apart"] == ["arm0/tokens"]
    assert amended["noise_bound"] >= 1 and amended["preregistered"] is False and amended["distinct_cells"] == 44
    # identical arms apart together count once; many apart is more than noise explains
    many = {**first, **{a: {"tokens": cell(1.5 + i / 1000)} for i, a in enumerate(arms[:8])}}
    amended = compute_rerun.agreement_with_first(rerun(many), reg, "hard", tmp_path)["verdict_amended"]
    assert not amended["agrees"] and "8 distinct cells apart" in amended["why"]
    twins = {**first, "twin-a": {"tokens": cell(1.5)}, "twin-b": {"tokens": cell(1.5)}}
    twins_first = {**first, "twin-b": first["twin-a"]}
    agree = rerun_agreement({"axes": {}, "table": twins_first}, {"axes": {}, "table": twins}, ("tokens",))
    amended = compute_rerun.amended_verdict(agree, amend, ["mopps"], "small")  # twin-a and twin-b: the same cells
    assert amended["apart"] == ["twin-a/tokens"] and amended["preregistered"] is True
    # a claimed arm's tokens intervals apart fails even when the count is within noise
    moved = {**first, "mopps": {"tokens": cell(1.5)}}
    amended = compute_rerun.agreement_with_first(rerun(moved), reg, "hard", tmp_path)["verdict_amended"]
    assert not amended["agrees"] and "claimed arms' tokens intervals apart" in amended["why"]
    with pytest.raises(ConfigError, match="amended_agreement"):
        compute_rerun.amended_verdict(out, {"pools": ["small"], "lvl": 0.9}, [], "small")


def test_the_rerun_table_sets_both_runs_side_by_side(tmp_path):
    h = {"value": 1.5, "t_lo": 1.2, "t_hi": 1.9, "arm": "oracle-select"}
    first = _first_run_json(tmp_path, "compute_to_target_hard.json", "benchmarks/preregistration.toml")
    first["compute"] = {"by_pool": {"hard": {"C0": h, "C3": {"value": 0.5, "arm": "mopps"}}}}
    (tmp_path / "compute_to_target_hard.json").write_text(json.dumps(first))
    counts = {"cells": 76, "overlap": 74, "inside": 65, "expected_apart_if_same": 1.26, "expected_inside_if_same": 62.0}
    second = {
        "compute": {"by_pool": {"hard": {"C0": {**h, "value": 1.1, "t_lo": 0.9, "t_hi": 1.3}, "C3": {"value": -0.7}}}},
        "partial": None,
        "agreement": {
            "counts": counts,
            "verdict": {"agrees": False, "why": "intervals apart: x/steps"},
            "verdict_amended": {"agrees": True, "why": "within noise", "preregistered": False},
        },
    }
    (tmp_path / "compute_to_target_hard_rerun.json").write_text(json.dumps(second))
    out = rerun_table(["hard", "small"], "benchmarks/preregistration.toml", tmp_path)
    assert "| hard | C0 | 1.50 [1.20, 1.90] (oracle-select) | 1.10 [0.90, 1.30] (oracle-select) |" in out
    assert "| hard | C3 | 0.50 (mopps) | -0.70 (C0 holds 1) |" in out and "| hard | C1 | — | — |" in out
    assert "74 of 76" in out and "1.26 apart expected" in out and "**does not agree** (intervals apart: x/steps)" in out
    assert "Amended criterion (after the fact here): **agrees**" in out and "`small`: not re-run yet." in out


def test_each_registration_writes_its_own_files():

    assert study.registration_tag(study.PREREG) == ""
    assert study.registration_tag("benchmarks/preregistration_rerun.toml") == "rerun"
    assert study.registration_tag("/elsewhere/preregistration_iw.toml") == "iw"


def test_compute_script_checks_its_pools_and_prints_the_table(tmp_path, capsys):

    reg = {
        "instrument": {"seeds": [0, 1, 2], "steps": 10, "uniform": ["grpo-n4"], "oracles": ["oracle-both"]},
        "claim": [],
    }
    f = study.config_fields(reg, ["hard"])
    assert f["seeds"] == f["other_seeds"] == 3 and f["long_arms"] == ("grpo-n4",) and f["sweep_each_pool"]
    with pytest.raises(SystemExit, match="consecutive"):
        study.config_fields({**reg, "instrument": {**reg["instrument"], "seeds": [0, 2]}}, ["hard"])
    prereg = tmp_path / "p.toml"
    prereg.write_text(
        'version = 1\n[instrument]\npools = ["hard"]\nseeds = [0, 1]\nsteps = 10\ntargets = [0.5]\n'
        'uniform = ["grpo-n4"]\noracles = ["oracle-both"]\n[[claim]]\nfigure = "C1"\narm = "mopps"\n'
    )
    with pytest.raises(SystemExit, match="not registered"):
        run.main(["--pools", "nowhere", "--here", "--prereg", str(prereg)])
    comp = compute.summarize(pool({"grpo-n4": {"steps": 400}, "mopps": {"tokens": 50.0}}), [], ("grpo-n4",), ())
    table = tables.markdown_table({"by_pool": {"hard": {"compute": comp}}})
    assert "| mopps | 2.00 [2.00, 2.00]" in table and "grpo-n4 (best uniform on hard)" in table
    # the opening table: pools side by side, an arm one pool lacks is a dash, the headlines below with their arm
    only_n4 = compute.summarize(pool({"grpo-n4": {"steps": 400}}), [], ("grpo-n4",), ())
    c1 = {"value": 2.0, "t_lo": 1.5, "t_hi": 2.5, "arm": "mopps", "preregistration": {"preregistered": True}}
    opening = tables.opening_table(
        {
            "hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C1": c1}}}},
            "small": {"by_pool": {"small": {"compute": only_n4}}},
        }
    )
    lines = opening.splitlines()
    assert lines[0] == "| arm | hard: tokens | hard: CPU / GPU-model | small: tokens | small: CPU / GPU-model |"
    assert next(ln for ln in lines if ln.startswith("| mopps |")).endswith("| — | — |")
    assert "| grpo-n4 (best uniform: hard; best uniform: small) |" in opening
    assert "| C1 | 2.00 [1.50, 2.50] (mopps) | — |" in opening
    # a headline with no value (no seed reached a target) is a dash, not a crash
    c1["value"] = None
    assert "| C1 | — |" in tables.opening_table(
        {"hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C1": c1}}}}}
    )
    # C3 is a share of the oracle's gain: where C0's interval holds 1 there is no gain to share, and the cell says so
    c0 = {"value": 1.06, "t_lo": 0.92, "t_hi": 1.22, "arm": "oracle-alloc"}
    c3 = {"value": 0.5, "arm": "mopps", "preregistration": {"preregistered": True}}
    heads = {"hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C0": c0, "C3": c3}}}}}
    assert "| C3 | 0.50 (mopps) (C0's interval holds 1: no ceiling gain to share) |" in tables.opening_table(heads)
    c0["t_lo"] = 1.1
    assert "| C3 | 0.50 (mopps) |" in tables.opening_table(heads)
