"""The fewer-samples study: its registration reads into `compare` settings, and its analysis and regeneration read
runs into the registered figures (synthetic runs whose factors are known)."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
    per_step = {a.name: a.cfg.n * dict(a.train)["run.batch_size"] for a in arms}
    assert {per_step[u] for u in inst["uniform"]} == {32, 64, 128}  # the grid: matched samples per step
    assert {n for u in inst["uniform"] for n in [dict((a.name, a.cfg.n) for a in arms)[u]]} == {2, 4, 8}
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
    assert analysis.verdict("C2", {"hard": {"value": 1.2}}) == "missed"
    assert analysis.verdict("C1", {"hard": {"value": 2.0, "t_lo": 0.9}}) == "missed"  # the interval holds 1
    assert analysis.verdict("C2", {"hard": {"value": 2.0, "undefined": 1}}) == "missed"  # a seed with no factor


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
    from docgen.fewer_samples import factors_rows, headline, result_section

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
    monkeypatch.setattr("docgen.fewer_samples.RESULT", tmp_path / "fewer_samples.json")
    head = "\n".join(headline(link="x.md"))
    assert f"| `default` | `grpo-n2x32` | {c1['value']:.2f} [" in head and "**Interim**" in head
    monkeypatch.setattr("docgen.fewer_samples.RESULT", tmp_path / "none.json")
    assert headline(link="x.md") == ["No result yet: the registered runs are in progress ([the study](x.md))."]
    res["by_pool"]["default"]["complete"] = True  # every arm, every seed on this pool: its rows are final
    final = "\n".join(result_section(res, registered_runs=612))
    assert "| C1 | default |" in final and "interim: **met**" not in final and "Complete (every arm" in final
    complete = {**res, "partial": None}
    assert "Interim" not in "\n".join(result_section(complete, registered_runs=612))
