"""The convergence benchmark's bookkeeping: steps-to-target, medians with misses, goals, summary merging."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.bench.compare import CompareConfig, arm_config, first_reach, med_range, summarize
from reinforce_ada.bench.summary import update_summary
from reinforce_ada.cli import main


def fake_run(acc: list[float], samples_per_step: int, no_signal: float, t: float) -> dict:
    steps = [0, 10, 20, 30]
    return {
        "eval_step": steps,
        "pool_accuracy": acc,
        "pool_accuracy_smooth": acc,
        "eval_samples_cum": [s * samples_per_step for s in steps],
        "eval_tokens_cum": [s * samples_per_step * 5 for s in steps],
        "no_signal_share": [no_signal] * 30,
        "zero_adv_share": [no_signal] * 30,
        "samples_per_step": [samples_per_step] * 30,
        "time_generate_s": [t / 2] * 30,
        "time_train_s": [t / 2] * 30,
        "time_step_s": [t] * 30,
        "final_per_level": {"L5": acc[-1]},
    }


def test_first_reach_and_misses():
    run = fake_run([0.1, 0.2, 0.3, 0.4], 100, 0.5, 1.0)
    assert first_reach(run, 0.25) == {"steps": 20, "samples": 2000, "tokens": 10000}
    assert first_reach(run, 0.9)["steps"] is None
    assert med_range([10, 20, None]) == {"median": 20.0, "min": 10, "max": 20, "reached": 2, "of": 3}
    assert med_range([10, None, None])["median"] is None  # most seeds missed: no median


def test_goals_from_synthetic_arms():
    results = {
        "arms": {
            "grpo-n4": {"n": 4, "runs": [fake_run([0.1, 0.15, 0.2, 0.3], 128, 0.6, 1.0)] * 3},
            "seq-bal": {"n": 4, "runs": [fake_run([0.1, 0.3, 0.35, 0.4], 640, 0.12, 1.2)] * 3},
            "grpo-matched": {"n": 20, "runs": [fake_run([0.1, 0.2, 0.3, 0.35], 640, 0.3, 2.0)] * 3},
        }
    }
    summarize(results)
    g = results["goals"]
    assert results["target_pool_accuracy"] == pytest.approx(0.3)
    assert g["P1"]["value"] == pytest.approx(30 / 10)
    assert g["P2"]["value"] == pytest.approx((20 * 640 * 5) / (10 * 640 * 5))
    assert g["P3"]["value"] == pytest.approx(0.12 / 0.6)
    assert g["P4"]["value"] == pytest.approx(1.2)


def test_update_summary_keeps_other_entries(tmp_path):
    f = tmp_path / "summary.json"
    f.write_text(json.dumps({"P5": {"value": 0.5}}))
    update_summary(f, {"P1": {"value": 2.0, "goal": ">= 2.0", "what": "x"}}, "cmd")
    s = json.loads(f.read_text())
    assert s["P5"] == {"value": 0.5} and s["P1"]["command"] == "cmd" and "date" in s["P1"]
    f.write_text(json.dumps({"P4": {"value": 1.5, "smollm2": {"value": 1.1}}}))
    update_summary(f, {"P4": {"value": 1.9}}, "cmd", nested={"P4": "convergence_run"})
    s = json.loads(f.read_text())["P4"]
    assert s["value"] == 1.5 and s["smollm2"] == {"value": 1.1} and s["convergence_run"]["value"] == 1.9


def test_arm_config_and_matched_needs_n():
    c = CompareConfig()
    assert arm_config("seq-bal", 1, c).strategy.exit == "balanced"
    assert arm_config("grpo-matched", 0, c, matched_n=20).strategy.n == 20
    with pytest.raises(ValueError, match="seq-bal"):
        arm_config("grpo-matched", 0, c)


def test_compare_cli_rejects_unknown_arm(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "--arms", "grpo-n4,ppo"])
    assert e.value.code == 2 and "ppo" in capsys.readouterr().err
