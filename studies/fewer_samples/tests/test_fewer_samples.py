"""The fewer-samples study: its registration reads into `compare` settings, and its analysis and regeneration read
runs into the registered figures (synthetic runs whose factors are known)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from docgen.sources import ROOT
from reinforce_ada.bench.arms import resolve_arms
from studies.fewer_samples import analysis, regenerate
from studies.fewer_samples.study import PREREG, config_fields, load
from studies.protocol import records


def test_the_registration_names_the_grid_the_arms_and_the_claims():
    reg = load(PREREG)
    inst = reg["instrument"]
    fields = config_fields(reg, inst["pools"])
    arms, skipped = resolve_arms(list(fields["arms"]))
    assert not skipped and len(arms) == len(inst["arms"])
    per_step = {a.name: a.cfg.options.n * dict(a.train)["run.batch_size"] for a in arms}
    assert {per_step[u] for u in inst["uniform"]} == {32, 64, 128}  # the grid: matched samples per step
    assert {n for u in inst["uniform"] for n in [dict((a.name, a.cfg.options.n) for a in arms)[u]]} == {2, 4, 8}
    assert per_step["spo-64"] == per_step["grpo-n4"] == 64
    assert fields["token_budget"] == inst["token_budget"] and fields["long_arms"] == () and fields["value_errors"]
    assert {c["figure"] for c in reg["claim"]} >= {"C1", "C2", "C2g", "E1", "V1"}


def synthetic_run(arm: str, seed: int, speed: float, plateau: float, pool: str = "default") -> dict:
    """A compact run whose accuracy rises as 0.2 + (plateau - 0.2) (1 - exp(-speed t / 5e4)) on a token grid."""
    t = np.linspace(0, 1.5e5, 21)
    acc = 0.2 + (plateau - 0.2) * (1 - np.exp(-speed * t / 5e4)) + 0.001 * seed
    return {
        "kind": "run",
        "id": f"{pool}-{arm}-{seed}",
        "key": f"main/{pool}/{arm}/lr0.0002/seed{seed}",
        "pool": pool,
        "arm": arm,
        "lr": 2e-4,
        "seed": seed,
        "steps": 400,
        "phase": "main",
        "eval_step": list(range(0, 420, 20)),
        "accuracy": acc.tolist(),
        "eval_tokens": t.tolist(),
        "eval_cpu_s": (t / 1000).tolist(),
        "eval_gpu_s": (t / 2000).tolist(),
        "errors": {"value_abs_error": 0.1 if arm.startswith("spo") else None, "group_mean_abs_error": 0.2},
    }


def synthetic(reg: dict, seeds: int = 3) -> list[dict]:
    """Three arms of the grid (the analysis reads the uniform arms that ran), the best one faster, and two SPO arms."""
    runs = []
    for s in range(seeds):
        for arm in ("grpo-n4", "grpo-n8"):
            runs.append(synthetic_run(arm, s, 1.0, 0.40))
        runs.append(synthetic_run("grpo-n2x32", s, 1.5, 0.40))  # the best uniform arm: faster, not 16 prompts a step
        runs.append(synthetic_run("spo-64", s, 3.3, 0.40))  # 2.2 times as fast again
        runs.append(synthetic_run("spo-32", s, 1.5, 0.45))  # as fast, a higher plateau
    return runs


def two_seed_result() -> tuple[list[dict], dict]:
    """Two seeds of the synthetic arms on `default` (one copy per arm and seed) and a result context reading them."""
    reg = load(PREREG)
    runs = list({(r["arm"], r["seed"]): r for r in synthetic(reg, seeds=2)}.values())
    meta = {"registration": {"content": reg}, "date": "2026-12-06"}
    return runs, {"name": "fewer_samples", "meta": meta, "runs": {"main": [r["id"] for r in runs], "sweep": []}}


@pytest.mark.slow
def test_the_figures_read_the_claims_against_the_best_uniform_arm():
    reg = load(PREREG)
    uniq = {(r["arm"], r["seed"]): r for r in synthetic(reg)}  # the faster grpo-n2x32 replaces the grid's copy
    f = analysis.pool_figures(list(uniq.values()), [], reg)
    assert f["compute"]["axes"]["tokens"]["best_uniform"] == "grpo-n2x32"
    c1 = f["compute"]["table"]["spo-64"]["tokens"]["value"]
    assert c1 == pytest.approx(2.2, rel=0.05)  # 3.3 / 1.5 on the same curve shape
    e = f["equal_tokens"]
    assert e["best_uniform"] == "grpo-n2x32" and e["arms"]["spo-32"]["diff"] == pytest.approx(0.05, abs=0.005)
    assert abs(e["arms"]["spo-64"]["diff"]) < 0.01  # both have reached the same plateau by the budget
    assert f["value_errors"]["spo-64"]["value_abs_error"] == pytest.approx(0.1)
    assert f["old_reference"]["best_of_16_prompt_family"] in analysis.OLD_FAMILY
    assert f["old_reference"]["grid_vs_old_on_tokens"]["value"] == pytest.approx(1.5, rel=0.05)
    claims = analysis.claims({"default": f}, reg)
    assert claims["C1"]["by_pool"]["default"]["reference"] == "grpo-n2x32"
    assert claims["C1"]["verdict"] == "incomplete" and claims["E1"]["verdict"] is None  # three pools have no runs
    assert f["complete"] is False  # five of the registered arms, three of the nine seeds
    one_pool = {**reg, "instrument": {**reg["instrument"], "pools": ["default"]}}
    assert analysis.claims({"default": f}, one_pool)["C1"]["verdict"] == "incomplete"
    assert analysis.claims({"default": {**f, "complete": True}}, one_pool)["C1"]["verdict"] == "met"
    # a complete pool that misses decides the claim, whatever the pools still running give
    slow = {
        **f,
        "complete": True,
        "compute": {**f["compute"], "table": {"spo-64": {"tokens": {"value": 1.2, "t_lo": 1.1}}}},
    }
    assert analysis.claims({"hard": slow, "default": f}, reg)["C1"]["verdict"] == "missed"
    assert analysis.verdict(analysis.REGISTERED_GOALS["C2"], {"hard": {"value": 1.2}}) == "missed"
    assert (
        analysis.verdict(analysis.REGISTERED_GOALS["C1"], {"hard": {"value": 2.0, "t_lo": 0.9}}) == "missed"
    )  # the interval holds 1
    assert (
        analysis.verdict(analysis.REGISTERED_GOALS["C2"], {"hard": {"value": 2.0, "undefined": 1}}) == "missed"
    )  # a seed with no factor


@pytest.mark.slow
def test_regenerate_writes_the_result_from_the_records_file(tmp_path, monkeypatch):
    runs, ctx = two_seed_result()
    path = tmp_path / "records.jsonl.gz"
    records.update(path, ctx, runs)
    stored_runs, results = records.read(path)
    res = regenerate.write(results["fewer_samples"], records.runs_of(results["fewer_samples"], stored_runs), tmp_path)
    written = json.loads((tmp_path / "fewer_samples.json").read_text())
    assert (tmp_path / "fewer_samples.png").exists() and written["claims"]["C1"]["arm"] == "spo-64"
    assert "hard" in res["partial"] and "2 of 9 seeds" in res["partial"]  # only default, two seeds: said so
    started = runs + [{**synthetic_run("grpo-n8", 0, 1.0, 0.4, pool="hard"), "id": "h"}]  # a pool just started
    assert list(regenerate.write(ctx, {"main": started, "sweep": []}, tmp_path)["by_pool"]) == ["default"]
    again = regenerate.write(results["fewer_samples"], records.runs_of(results["fewer_samples"], stored_runs), tmp_path)
    assert json.loads((tmp_path / "fewer_samples.json").read_text()) == written and again["claims"] == res["claims"]


@pytest.mark.slow
def test_the_docs_page_labels_an_unfinished_result_interim_and_quotes_its_numbers(tmp_path, monkeypatch):
    from studies.fewer_samples.page import headline
    from studies.fewer_samples.page_tables import factors_rows, result_section

    runs, ctx = two_seed_result()
    res = regenerate.write(ctx, {"main": runs, "sweep": []}, tmp_path)
    text = "\n".join(result_section(res, registered_runs=612))
    assert f"**Interim**: {len(runs)} of 612 registered main runs" in text
    c1 = res["claims"]["C1"]["by_pool"]["default"]
    row = next(line for line in text.splitlines() if line.startswith("| C1 | default |"))
    assert f"{c1['value']:.2f} [{c1['t_lo']:.2f}, {c1['t_hi']:.2f}]" in row and "interim: **met**" in row
    assert "On the seeds recorded so far (interim), C1: incomplete" in text  # one pool of four: no verdict yet
    e1 = res["by_pool"]["default"]["equal_tokens"]["arms"]["spo-32"]["diff"]
    assert f"{e1:+.3f}" in text and "| default | 0.10 | 0.10 | 0.20 |" in text  # E1 and V1 of the synthetic runs
    table = res["by_pool"]["default"]["compute"]["table"]
    table["spo-32"]["cpu_s"] = {"value": None, "seeds": [], "unpriced": "no recorded seconds"}
    assert "| `spo-32` | " in "\n".join(factors_rows(res, "cpu_s")) and "not priced" in "\n".join(
        factors_rows(res, "cpu_s")
    )
    monkeypatch.setattr("studies.fewer_samples.page.RESULT", tmp_path / "fewer_samples.json")
    head = "\n".join(headline(link="x.md"))
    assert f"| `default` | `grpo-n2x32` | {c1['value']:.2f} [" in head and "**Interim**" in head
    monkeypatch.setattr("studies.fewer_samples.page.RESULT", tmp_path / "none.json")
    assert headline(link="x.md") == ["No result yet: the registered runs are in progress ([the study](x.md))."]
    res["by_pool"]["default"]["complete"] = True  # every arm, every seed on this pool: its rows are final
    final = "\n".join(result_section(res, registered_runs=612))
    assert "| C1 | default |" in final and "interim: **met**" not in final and "Complete (every arm" in final
    complete = {**res, "partial": None}
    assert "Interim" not in "\n".join(result_section(complete, registered_runs=612))


CONFIRMATION = PREREG.parent / "confirmation.toml"


def test_the_confirmation_runs_unseen_pools_and_seeds_in_a_folder_of_its_own():
    from studies.fewer_samples.study import RESULTS, name_of, places, pool_names

    first, later = load(PREREG), load(CONFIRMATION)
    assert name_of(first) == "fewer_samples" and places(first).records == RESULTS / "records.jsonl.gz"
    where = places(later)
    assert name_of(later) == "confirmation" and where.records == RESULTS / "confirmation" / "records.jsonl.gz"
    assert where.run_root != places(first).run_root and where.out == RESULTS / "confirmation"
    assert pool_names(later) == ["hard-s1", "small-s1", "default-s1", "mixed-s1"]
    assert not set(later["instrument"]["seeds"]) & set(first["instrument"]["seeds"])  # never-run seeds
    arms, skipped = resolve_arms(list(config_fields(later, later["instrument"]["pools"])["arms"]))
    assert not skipped and {a.name for a in arms} >= set(later["instrument"]["uniform"]) | {"spo-32", "n2-tracker"}
    goals = {c["figure"]: analysis.goal_of(c) for c in later["claim"]}
    assert goals["K1"] == analysis.Goal("tokens", 1.0, 1.0) and goals["K4"].pools == (
        "hard-s1",
        "default-s1",
        "mixed-s1",
    )
    assert goals["R1"].at_least is None and goals["E1"] is None  # reported without a goal; E1 off no axis
    assert (
        analysis.goal_of({"figure": "C1", "arm": "spo-64"}) == analysis.REGISTERED_GOALS["C1"]
    )  # the first's, in prose


def _toml(v) -> str:
    """A TOML value (JSON's scalars and arrays are TOML's; a dict is an inline table)."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ({"axis": "seconds"}, "axis = 'seconds'; use one of"),
        ({"at_least": "1.0"}, "at_least = '1.0'; write a number"),
        ({"at_least": True}, "at_least = True; write a number"),
        ({"at_least_on": {"hard-s1": "x"}}, "at_least_on.hard-s1 = 'x'"),
        ({"pools": ["hard"]}, "names pools ['hard']; registered:"),
        ({"at_least": None, "lower_end_above": 1.0}, "need at_least"),
        ({"at_least_on": 2.0}, "at_least_on = 2.0; write a table"),
        ({"pools": []}, "pools = []; list the pools"),
    ],
)
def test_a_goal_written_wrong_is_refused_naming_the_claim_and_key(tmp_path, edit, says):
    import tomllib

    reg = tomllib.loads(CONFIRMATION.read_text())
    claim = {k: v for k, v in {**reg["claim"][0], **edit}.items() if v is not None}
    lines = [f"{k} = {_toml(v)}" for k, v in claim.items()]
    text = CONFIRMATION.read_text().split("[[claim]]")[0] + "[[claim]]\n" + "\n".join(lines) + "\n"
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(SystemExit, match="claim K1") as e:
        load(bad)
    assert says in str(e.value)


def test_a_registration_name_or_pool_that_cannot_be_a_folder_or_a_pool_is_refused(tmp_path):
    text = CONFIRMATION.read_text()
    for old, new, says in [
        ('name = "confirmation"', 'name = "../x"', "name = '../x'"),
        ("hard-s1=arithmetic:", "small-s1=arithmetic:", "repeat a name"),
        ("filter=0-0.375,seed=1", "filter=0-0.375,seed=one", "seed='one' is not valid"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text.replace(old, new, 1))
        with pytest.raises(SystemExit, match="bad.toml") as e:
            load(bad)
        assert says in str(e.value), (new, str(e.value))


def test_a_claim_on_a_length_axis_needs_the_instrument_to_name_it(tmp_path):
    text = CONFIRMATION.read_text()
    claim = text.split("[[claim]]")[1]
    axis = claim.split("axis = ")[1].split("\n")[0]
    long_claim = claim.replace(f"axis = {axis}", 'axis = "bill_tokens"', 1)
    bad = tmp_path / "bad.toml"
    bad.write_text(text.split("[[claim]]")[0] + "[[claim]]" + long_claim)
    with pytest.raises(SystemExit, match="name it in \\[instrument\\] length_axes"):
        load(bad)
    named = text.split("[[claim]]")[0].replace("eval_points = 20", 'eval_points = 20\nlength_axes = ["bill_tokens"]')
    bad.write_text(named + "[[claim]]" + long_claim)
    assert load(bad)["instrument"]["length_axes"] == ["bill_tokens"]
    bad.write_text(named.replace('["bill_tokens"]', '["bill"]') + "[[claim]]" + long_claim)
    with pytest.raises(SystemExit, match="length_axes = \\['bill'\\]; list some of"):
        load(bad)


def test_a_compact_run_keeps_its_length_axes_at_each_evaluation():
    from reinforce_ada.bench.compute import axis_x
    from studies.protocol.records import compact

    rec = {
        "key": "r",
        "pool": "p",
        "arm": "a",
        "lr": 1e-4,
        "seed": 0,
        "steps": 2,
        "phase": "main",
        "eval_step": [0, 2],
        "accuracy": [0.1, 0.2],
        "eval_tokens": [40, 140],
        "prompt_tokens_per_step": [30, 20],
        "longest_per_round": [[10], [12, 3]],
        "tokens_per_step": [60, 40],
        "prefill_tokens_per_step": [10, 10],
        "tokens_trained": [50, 30],
        "time_step_s": [1.0, 1.0],
        "prior": {"samples": 8, "tokens": 40, "prompt_tokens": 16, "prefill_tokens": 4, "longest": 9},
    }
    small = compact(rec, 2, "r")
    assert "prompt_tokens_per_step" not in small and "longest_per_round" not in small
    for axis in ("bill_tokens", "gpu_len_s"):
        assert axis_x(small, axis) == pytest.approx(axis_x(rec, axis))


def test_a_goal_on_named_pools_reads_only_those_and_a_higher_bar_where_named():
    goal = analysis.Goal("cpu_s", 1.0, lower_end_above=1.0, at_least_on={"b": 1.5}, pools=("a", "b"))
    ok = {"value": 1.6, "t_lo": 1.1}
    assert analysis.verdict(goal, {"a": ok, "b": ok}) == "met"
    assert analysis.verdict(goal, {"a": ok, "b": {"value": 1.4, "t_lo": 1.1}}) == "missed"  # b's own bar
    assert analysis.verdict(goal, {"a": {"value": 1.2, "t_lo": 0.95}, "b": ok}) == "missed"  # the interval holds 1
    assert analysis.verdict(analysis.Goal("tokens"), {"a": ok}) is None  # reported, no goal
    f = {"complete": True, "compute": {"table": {"x": {"cpu_s": ok}}, "axes": {"cpu_s": {"best_uniform": "u"}}}}
    reg = {
        "instrument": {"pools": ["a", "b", "c"]},
        "claim": [{"figure": "K", "arm": "x", "axis": "cpu_s", "at_least": 1.0, "pools": ["a", "b"]}],
    }
    out = analysis.claims({"a": f, "b": f, "c": {**f, "complete": False}}, reg)["K"]
    assert set(out["by_pool"]) == {"a", "b"} and out["verdict"] == "met" and out["axis"] == "cpu_s"  # c not its pool
    assert analysis.claims({"a": f}, reg)["K"]["verdict"] == "incomplete"  # b has no runs yet
    assert analysis.claims({"c": f}, reg)["K"]["verdict"] == "incomplete"  # none of its pools has


@pytest.mark.slow
def test_a_later_registration_regenerates_into_its_folder_and_shows_on_the_page(tmp_path, monkeypatch):
    from studies.fewer_samples import page as study_page
    from studies.fewer_samples import study

    runs, ctx = two_seed_result()
    later = load(CONFIRMATION)
    later = {
        **later,
        "instrument": {**later["instrument"], "pools": ["default=" + later["instrument"]["pools"][2].split("=", 1)[1]]},
    }
    renamed = [{**r, "id": "c" + r["id"], "seed": r["seed"] + 100} for r in runs]
    meta = {**ctx["meta"], "registration": {"content": later}, "config": {"seed_offset": 100, "sweep_seeds": 2}}
    later_ctx = {"name": "confirmation", "meta": meta, "runs": {"main": [r["id"] for r in renamed], "sweep": []}}
    results = tmp_path / "studies" / "fewer_samples" / "results"
    records.update(results / "records.jsonl.gz", ctx, runs)
    records.update(results / "confirmation" / "records.jsonl.gz", later_ctx, renamed)
    monkeypatch.setattr(study, "RESULTS", results)
    monkeypatch.setattr(regenerate, "RESULTS", results)
    monkeypatch.setattr(regenerate, "RECORDS", results / "records.jsonl.gz")
    assert study.later_registrations(results) == ["confirmation"]
    regenerate.main(["--out", str(results)])
    res = json.loads((results / "confirmation" / "confirmation.json").read_text())
    assert (results / "fewer_samples.json").exists() and (results / "confirmation" / "confirmation.png").exists()
    assert (
        res["claims"]["K1"]["by_pool"]["default"]["reference"] == "grpo-n2x32"
        and res["claims"]["K1"]["axis"] == "tokens"
    )
    assert res["claims"]["K1"]["verdict"] == "incomplete" and "2 of 9 seeds" in res["partial"]
    # the page: the first registration's result, then the later one's, its claims read off their own axes
    regs = tmp_path / "studies" / "fewer_samples" / "registrations"
    regs.mkdir(parents=True)
    (regs / "preregistration.toml").write_text(PREREG.read_text())
    (regs / "confirmation.toml").write_text(CONFIRMATION.read_text())
    llm_spo = Path("studies/llm_convergence/results/llm_spo/llm_spo.json")  # the page's SPO sentence reads it
    (tmp_path / llm_spo).parent.mkdir(parents=True)
    (tmp_path / llm_spo).write_text((ROOT / llm_spo).read_text())
    monkeypatch.setattr(study_page, "STUDIES", tmp_path / "studies")
    monkeypatch.setattr(study_page, "ROOT", tmp_path)
    monkeypatch.setattr("docgen.sources.STUDIES", tmp_path / "studies")
    page = study_page.page()
    text = page.render()
    assert "## Later registration: `confirmation`" in text and "### Result" in text
    k1 = res["claims"]["K1"]["by_pool"]["default"]
    assert any(line.startswith("| K1 | default |") and f"{k1['value']:.2f} [" in line for line in text.splitlines())
    assert "`confirmation`, interim" in page.verdict and "own seeds 1100-1101" in text
    assert any(line.startswith("| R1 | default |") and "reported (no goal)" in line for line in text.splitlines())
    (results / "confirmation" / "confirmation.json").unlink()
    assert "`confirmation`: registered, no result yet." in study_page.page().verdict
    (regs / "confirmation.toml").write_text(CONFIRMATION.read_text().replace('name = "confirmation"\n', ""))
    with pytest.raises(ValueError, match="confirmation.toml: a later registration needs a name"):
        study_page.page()  # it would read and write the first registration's result


def test_a_registered_study_without_results_says_it_is_running():
    from studies.fewer_samples.page import RESULT, page

    got = page()
    if not RESULT.exists():
        assert "runs in progress" in got.verdict and got.status == "info" and not got.provenance
    assert "C1" in got.render() and "spo-64" in got.render()  # the registered claims, from the registration


def test_a_twin_claim_reads_the_best_uniform_arms_lever_against_it(tmp_path):
    reg = load(PREREG)
    twin = {"figure": "L1", "twin": "-cap", "axis": "tokens", "at_least": 1.3, "lower_end_above": 1.0}
    reg = {**reg, "claim": [twin]}
    runs = list({(r["arm"], r["seed"]): r for r in synthetic(reg)}.values())
    runs += [synthetic_run("grpo-n2x32-cap", s, 2.1, 0.40) for s in range(3)]  # 1.4x its uncapped twin
    runs += [synthetic_run("grpo-n4-cap", s, 9.0, 0.40) for s in range(3)]  # fast, but not the best arm's twin
    f = analysis.pool_figures(runs, [], reg)
    row = f["twins"]["-cap"]["tokens"]
    assert (row["arm"], row["reference"]) == ("grpo-n2x32-cap", "grpo-n2x32")
    assert row["value"] == pytest.approx(1.4, rel=0.05)
    out = analysis.claims({"default": {**f, "complete": True}}, {**reg, "instrument": {"pools": ["default"]}})["L1"]
    assert out["arm"] == "the best uniform arm-cap" and out["by_pool"]["default"]["arm"] == "grpo-n2x32-cap"
    assert out["verdict"] == "met"
    no_twin = analysis.pool_figures([r for r in runs if r["arm"] != "grpo-n2x32-cap"], [], reg)
    assert no_twin["twins"] == {}  # the best arm's twin has not run: no figure, the claim stays incomplete
    assert analysis.claims({"default": no_twin}, reg)["L1"]["verdict"] == "incomplete"
    (bad := tmp_path / "twin.toml").write_text(CONFIRMATION.read_text() + '\n[[claim]]\nfigure = "L1"\ntwin = "-cap"\n')
    with pytest.raises(SystemExit, match="twin of every uniform arm; missing: \\['grpo-n2x16-cap'"):
        load(bad)


def test_samples_per_step_rank_the_arms_by_spearman_with_ties_and_oracles_left_out():
    arms = [("grpo-n4", 64, 1.0), ("grpo-n8", 128, 0.8), ("grpo-n2x32", 64, 1.2), ("spo-64", 64, 2.0)]
    arms += [("spo-32", 32, 3.0), ("spo-64-oracle", 8, 0.1)]  # an oracle breaking the order: left out
    runs = [{**synthetic_run(a, 0, v, 0.40), "head": {"mean": {"samples_per_step": n}}} for a, n, v in arms]
    reg = load(PREREG)
    f = analysis.pool_figures(runs, [], reg)
    s1 = f["samples_rank"]
    assert "spo-64-oracle" not in s1["arms"] and len(s1["arms"]) == 5
    # samples ranks 2.5 4 2.5 2.5 1 -> with ties: [3, 5, 3, 3, 1]; factors rank 2 1 3 4 5 by speed
    x, y = np.array([3, 5, 3, 3, 1.0]), np.array([2, 1, 3, 4, 5.0])
    assert s1["rho"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert analysis._ranks(np.array([64, 128, 64, 64, 32.0])).tolist() == [3, 5, 3, 3, 1]
    assert analysis.samples_rank(runs[:2], f["compute"])["rho"] is None  # two arms: no rank correlation
    claims = analysis.claims({"default": f}, {**reg, "claim": [{"figure": "S1", "arm": "grpo-n4"}]})
    assert claims["S1"]["by_pool"]["default"]["rho"] == s1["rho"] and claims["S1"]["verdict"] is None
