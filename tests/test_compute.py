"""Compute-to-target statistics (bench.compute) and pre-registration (bench.prereg): closed-form synthetic curves."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from reinforce_ada.bench import compute, curves, prereg
from reinforce_ada.errors import ConfigError

STEPS = 200


def record(arm, seed, *, speed=1.0, tokens=100.0, sec=0.1, top=0.3, steps=STEPS, lr=1e-4, noise=0.0):
    """A run whose accuracy at step s is 0.2 + top (1 - exp(-speed s / 60)), `tokens` and `sec` per step."""
    ev = list(range(0, steps + 1, 10))
    rng = np.random.default_rng(seed)
    acc = [0.2 + top * (1 - np.exp(-speed * s / 60)) + (noise * rng.normal() if s else 0.0) for s in ev]
    return {
        "key": f"main/p/{arm}/lr{lr:g}/seed{seed}",
        "arm": arm,
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "eval_step": ev,
        "accuracy": acc,
        "eval_tokens": [tokens * s for s in ev],
        "time_step_s": [sec] * steps,
    }


def pool(arms: dict[str, dict], seeds=range(5)):
    return [record(a, s, **kw) for a, kw in arms.items() for s in seeds]


UNIFORM = ("grpo-n2", "grpo-n4", "grpo-n8")


def test_tokens_factor_is_exact_for_a_rescaled_curve():
    recs = pool({"grpo-n4": {"steps": 400}, "cheap": {"tokens": 50.0}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("steps", "tokens", "cpu_s"))
    row = out["table"]["cheap"]
    assert row["tokens"]["value"] == pytest.approx(2.0, rel=1e-6)
    assert row["steps"]["value"] == pytest.approx(1.0, rel=1e-6)
    assert row["tokens"]["t_lo"] == pytest.approx(2.0, rel=1e-6)  # identical seeds: a zero-width interval
    for f, cell in row["tokens_per_target"].items():
        assert cell["value"] == pytest.approx(2.0, rel=1e-3), f


def test_best_uniform_is_chosen_per_axis():
    # n8 learns twice as fast per step and costs twice the tokens: equal on tokens, better on steps and seconds
    recs = pool({"grpo-n4": {"steps": 400}, "grpo-n8": {"speed": 2.0, "tokens": 200.0, "steps": 400}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("steps", "tokens", "cpu_s"))
    assert out["axes"]["steps"]["best_uniform"] == "grpo-n8"
    assert out["axes"]["cpu_s"]["best_uniform"] == "grpo-n8"
    scores = out["axes"]["tokens"]["uniform_vs_grpo_n4"]
    assert scores["grpo-n8"] == pytest.approx(1.0, rel=0.03)  # linear interpolation between evaluations
    assert out["table"]["grpo-n4"]["steps"]["value"] == pytest.approx(0.5, rel=0.03)


def test_misses_are_listed_per_target_not_averaged_in():
    recs = pool({"grpo-n4": {"steps": 400}, "stuck": {"top": 0.1}})
    out = compute.summarize(recs, [], UNIFORM, (), axes=("tokens",))
    high = out["table"]["stuck"]["tokens_per_target"]["0.9"]
    assert high["missed"] == list(range(5)) and high["value"] is None
    low = out["table"]["stuck"]["tokens_per_target"]["0.1"]
    assert not low["missed"] and low["value"] is not None


def test_oracle_share_is_the_linear_share_of_the_oracle_gain():
    recs = pool({"grpo-n4": {"steps": 400}, "arm": {"tokens": 50.0}, "oracle-both": {"tokens": 100 / 3}})
    out = compute.summarize(recs, [], UNIFORM, ("oracle-select", "oracle-both"), axes=("tokens",))
    assert out["oracle"] == "oracle-both"
    assert out["table"]["arm"]["oracle_share"]["value"] == pytest.approx(0.5, rel=1e-5)
    heads = compute.headline(out, "arm")
    assert heads["C0"]["value"] == pytest.approx(3.0, rel=1e-5)
    assert heads["C1"]["value"] == pytest.approx(2.0, rel=1e-5)
    assert compute.best_after_the_fact(out, ("grpo-n4", "oracle-both"))["arm"] == "arm"


def test_seconds_axis_sums_the_recorded_step_times():
    r = record("a", 0, sec=0.5)
    assert compute.axis_x(r, "cpu_s")[:3] == pytest.approx([0.0, 5.0, 10.0])
    with pytest.raises(ValueError, match="unknown cost axis"):
        compute.axis_x(r, "joules")
    short = dict(r, time_step_s=[0.1] * 5)
    with pytest.raises(ValueError, match="step times"):
        compute.axis_x(short, "cpu_s")


def test_equal_lr_reads_the_sweep_at_the_references_lr():
    main = pool({"grpo-n4": {"steps": 400, "lr": 1e-4}, "arm": {"lr": 2e-4}})
    sweep = [record("grpo-n4", 1000 + s, lr=1e-4, steps=400) for s in range(3)] + [
        record("arm", 1000 + s, lr=1e-4, tokens=80.0) for s in range(3)
    ]
    out = compute.summarize(main, sweep, UNIFORM, (), axes=("tokens",))
    eq = out["equal_lr"]
    assert eq["lr"] == 1e-4 and eq["reference"] == "grpo-n4"
    assert eq["arms"]["arm"]["value"] == pytest.approx(1.25, rel=1e-6)


def test_the_uniform_family_needs_grpo_n4():
    with pytest.raises(ValueError, match="grpo-n4"):
        compute.summarize(pool({"grpo-n8": {}}), [], UNIFORM, ())


# -- pre-registration ---------------------------------------------------------------------------------------------
GOOD = """version = 1
[instrument]
pools = ["hard", "small"]
seeds = [0, 1, 2]
steps = 200
targets = [0.1, 0.5, 0.9]
uniform = ["grpo-n4", "grpo-n8"]
oracles = ["oracle-both"]
[[claim]]
figure = "C1"
arm = "mopps"
goal = ">= 2.0"
"""


def test_prereg_loads_and_rejects_bad_files(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(GOOD)
    assert prereg.load(f)["claim"][0]["arm"] == "mopps"
    for bad, match in [
        (GOOD.replace("version = 1", "version = 2"), "version"),
        (GOOD.replace("seeds = [0, 1, 2]", "seeds = [0, 0]"), "distinct"),
        (GOOD.replace('figure = "C1"', 'figure = "C9"'), "C9"),
        (GOOD.replace("targets = [0.1, 0.5, 0.9]", "targets = [1.5]"), "fractions"),
        (GOOD.split("[[claim]]")[0], "claim"),
        ("version = 1\n[instrument\n", "TOML"),
    ]:
        f.write_text(bad)
        with pytest.raises(ConfigError, match=match):
            prereg.load(f)
    with pytest.raises(ConfigError, match="does not exist"):
        prereg.load(tmp_path / "nope.toml")


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_prereg_check_marks_every_mismatch(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "bench").mkdir()
    f = tmp_path / "bench" / "p.toml"  # below the top: git paths are read from the top
    f.write_text(GOOD)
    _git(tmp_path, "add", "bench/p.toml")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "prereg")
    reg, prov = prereg.load(f), prereg.provenance(f)
    assert prov["committed"] and len(prov["commit"]) == 40
    run = {"seeds": [0, 1, 2], "steps": 200, "targets": [0.1, 0.5, 0.9]}
    assert prereg.check(reg, prov, "C1", "mopps", "hard", run) == {"preregistered": True, "why": []}
    no = prereg.check(reg, prov, "C1", "seq-bal", "mixed", {**run, "seeds": [0, 1]})
    assert not no["preregistered"] and len(no["why"]) == 3
    f.write_text(GOOD + "\n# edited after the commit\n")
    edited = prereg.check(prereg.load(f), prereg.provenance(f), "C1", "mopps", "hard", run)
    assert not edited["preregistered"] and "last commit" in edited["why"][0]
    assert not prereg.check(None, None, "C1", "mopps", "hard", run)["preregistered"]


def test_a_rerun_is_checked_against_the_first_on_the_compute_headlines():
    from reinforce_ada.bench.report import agreement

    def res(value, lo, hi):
        head = {"C1": {"value": value, "t_lo": lo, "t_hi": hi, "lo": value, "hi": value}}
        return {"by_pool": {"hard": {"goals": {}}}, "compute": {"by_pool": {"hard": head}}}

    agree = agreement(res(1.2, 1.0, 1.4), res(1.3, 1.1, 1.5))["hard"]["C1"]
    assert agree["overlap"] and agree["second_in_first"] and agree["first_in_second"]
    apart = agreement(res(1.2, 1.1, 1.3), res(2.0, 1.8, 2.2))["hard"]["C1"]
    assert apart["overlap"] is False and not apart["second_in_first"]


def test_the_factor_panel_draws_every_arm_with_a_factor():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reinforce_ada.bench.report import _factor_panel

    recs = pool({"grpo-n4": {"steps": 400}, "arm": {"tokens": 50.0}, "oracle-both": {"tokens": 40.0}})
    comp = compute.summarize(recs, [], UNIFORM, ("oracle-both",), axes=("tokens",))
    fig, ax = plt.subplots()
    _factor_panel(ax, comp, "p")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["grpo-n4", "arm", "oracle-both"]
    plt.close(fig)


def test_agreement_counts_overlapping_intervals_and_reports_what_differs():
    from reinforce_ada.bench.compute import rerun_agreement

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
    from reinforce_ada.bench.compute import chance_apart

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


def _first_run_json(folder, name, prereg_path, pool="hard", lrs=None, table=None):
    data = {
        "preregistration_file": {"path": prereg_path},
        "lrs_by_pool": {pool: lrs or {"grpo-n4": 2e-4, "mopps": 1e-4}},
        "by_pool": {pool: {"compute": {"axes": {"tokens": {"best_uniform": "grpo-n4"}}, "oracle": "oracle-alloc",
                                       "table": table or {}}}},
    }  # fmt: skip
    (folder / name).write_text(json.dumps(data))
    return data


def test_a_rerun_reads_only_its_own_first_run_and_its_lrs(tmp_path):
    """The re-run mode (benchmarks/compute_to_target.py): the first run is the JSON written under the registration
    the re-run names, never a `_rerun` file or another registration's; its per-pool lrs fix every arm, no sweep."""
    from benchmarks import compute_to_target as ctt

    _first_run_json(tmp_path, "compute_to_target_hard_rerun.json", "/x/benchmarks/preregistration.toml")
    _first_run_json(tmp_path, "compute_to_target_hard.json", "/x/benchmarks/other.toml", lrs={"grpo-n4": 9.0})
    assert ctt.first_run("hard", "benchmarks/preregistration.toml", tmp_path) is None
    with pytest.raises(SystemExit, match="no first run of pool 'hard'"):
        ctt.rerun_fields("hard", "benchmarks/preregistration.toml", tmp_path)
    _first_run_json(tmp_path, "compute_to_target.json", "/y/benchmarks/preregistration.toml")
    path, _ = ctt.first_run("hard", "benchmarks/preregistration.toml", tmp_path)
    assert path.name == "compute_to_target.json"
    assert ctt.first_run("small", "benchmarks/preregistration.toml", tmp_path) is None
    fields = ctt.rerun_fields("hard", "benchmarks/preregistration.toml", tmp_path)
    assert fields == {"fixed_lrs": (("grpo-n4", 2e-4), ("mopps", 1e-4)), "sweep_each_pool": False, "extend_sweep": 0}


def test_a_rerun_verdict_follows_the_registered_criterion(tmp_path):
    """Agrees when every interval overlaps and the claimed arms (and the oracle) fall inside the first intervals."""
    from benchmarks import compute_to_target as ctt

    cell = {"value": 1.0, "t_lo": 0.9, "t_hi": 1.1}
    first = {"mopps": {"tokens": cell}, "oracle-alloc": {"tokens": cell}, "seq-bal": {"tokens": cell}}
    _first_run_json(tmp_path, "compute_to_target_hard.json", "benchmarks/preregistration.toml", table=first)
    reg = {"rerun_of": "benchmarks/preregistration.toml", "claim": [{"arm": "mopps"}, {"arm": "oracle"}]}

    def rerun(table):
        return {"by_pool": {"hard": {"compute": {"axes": {"tokens": {"best_uniform": "grpo-n4"}}, "table": table}}}}

    same = ctt.agreement_with_first(rerun(first), reg, "hard", tmp_path)
    assert same["verdict"]["agrees"] and same["counts"] == {
        "cells": 3,
        "overlap": 3,
        "inside": 3,
        "expected_apart_if_same": None,
        "expected_inside_if_same": None,
    }
    shifted = {**first, "mopps": {"tokens": {"value": 1.15, "t_lo": 1.05, "t_hi": 1.25}}}  # overlaps, not inside
    out = ctt.agreement_with_first(rerun(shifted), reg, "hard", tmp_path)
    assert not out["verdict"]["agrees"] and "mopps" in out["verdict"]["why"] and "apart" not in out["verdict"]["why"]
    apart = {**first, "seq-bal": {"tokens": {"value": 2.0, "t_lo": 1.8, "t_hi": 2.2}}}
    out = ctt.agreement_with_first(rerun(apart), reg, "hard", tmp_path)
    assert not out["verdict"]["agrees"] and "seq-bal/tokens" in out["verdict"]["why"]


def test_the_amended_verdict_allows_what_seed_noise_explains(tmp_path):
    """[amended_agreement]: apart cells up to the noise quantile pass, identical arms count once, a claimed arm's
    tokens intervals must overlap, and the verdict says on which pools it was registered in advance."""
    from benchmarks import compute_rerun
    from benchmarks import compute_to_target as ctt

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
    out = ctt.agreement_with_first(rerun(one), reg, "hard", tmp_path)
    amended = out["verdict_amended"]
    assert not out["verdict"]["agrees"] and amended["agrees"], amended
    assert amended["apart"] == ["arm0/tokens"]
    assert amended["noise_bound"] >= 1 and amended["preregistered"] is False and amended["distinct_cells"] == 44
    # identical arms apart together count once; many apart is more than noise explains
    many = {**first, **{a: {"tokens": cell(1.5 + i / 1000)} for i, a in enumerate(arms[:8])}}
    amended = ctt.agreement_with_first(rerun(many), reg, "hard", tmp_path)["verdict_amended"]
    assert not amended["agrees"] and "8 distinct cells apart" in amended["why"]
    twins = {**first, "twin-a": {"tokens": cell(1.5)}, "twin-b": {"tokens": cell(1.5)}}
    twins_first = {**first, "twin-b": first["twin-a"]}
    agree = compute.rerun_agreement({"axes": {}, "table": twins_first}, {"axes": {}, "table": twins}, ("tokens",))
    amended = compute_rerun.amended_verdict(agree, amend, ["mopps"], "small")  # twin-a and twin-b: the same cells
    assert amended["apart"] == ["twin-a/tokens"] and amended["preregistered"] is True
    # a claimed arm's tokens intervals apart fails even when the count is within noise
    moved = {**first, "mopps": {"tokens": cell(1.5)}}
    amended = ctt.agreement_with_first(rerun(moved), reg, "hard", tmp_path)["verdict_amended"]
    assert not amended["agrees"] and "claimed arms' tokens intervals apart" in amended["why"]
    with pytest.raises(ConfigError, match="amended_agreement"):
        compute_rerun.amended_verdict(out, {"pools": ["small"], "lvl": 0.9}, [], "small")


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
        agree = compute.rerun_agreement({"axes": {}, "table": first}, {"axes": {}, "table": second}, ("tokens",))
        return compute.joint_null(first, second, claimed=["a0"], draws=400), [
            c["tokens"]["p_apart_if_same"] for c in agree["arms"].values()
        ]

    j, independent = both(0.3, 0)
    assert j["distinct_cells"] == 30 and j["not_preregistered"]
    assert abs(j["apart_mean"] - sum(independent)) < 0.3
    assert j["apart_quantile"] > compute.noise_quantile(independent, 0.95)
    assert j["p_none_apart"] > np.exp(-sum(independent)) + 0.05
    assert 0 <= j["p_registered_passes"] <= j["p_none_apart"] <= 1
    j, independent = both(0.0, 1)
    assert j["apart_quantile"] <= compute.noise_quantile(independent, 0.95)
    assert abs(j["p_none_apart"] - np.exp(-sum(independent))) < 0.1


def test_joint_null_tests_a_claimed_arm_for_a_shift():
    rng = np.random.default_rng(2)
    first, second = _runs_with_a_shared_reference(rng, arms=4, link=0.0)
    moved = {**second, "a1": {"tokens": _cell(np.array(second["a1"]["tokens"]["per_seed"]) * 3.0)}}
    j = compute.joint_null(first, moved, claimed=["a0"], shift_arms=["a1"], draws=500)
    assert j["claimed_shift_p"]["a1"] < 0.01 and j["claimed_shift_p"]["a0"] > 0.01
    twin = {**moved, "a1-twin": moved["a1"]}  # an identical arm shares the cell; its name still gets its p
    j = compute.joint_null({**first, "a1-twin": first["a1"]}, twin, shift_arms=["a1-twin"], draws=200)
    assert j["claimed_shift_p"]["a1-twin"] < 0.01 and j["distinct_cells"] == 4
    assert compute.joint_null({"x": {"tokens": {"value": 1.0}}}, {"x": {"tokens": {"value": 1.0}}}) is None


def test_the_rerun_table_sets_both_runs_side_by_side(tmp_path):
    from benchmarks.compute_rerun import rerun_table

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
    from benchmarks import compute_to_target as ctt

    assert ctt.registration_tag(ctt.PREREG) == ""
    assert ctt.registration_tag("benchmarks/preregistration_rerun.toml") == "rerun"
    assert ctt.registration_tag("/elsewhere/preregistration_iw.toml") == "iw"
