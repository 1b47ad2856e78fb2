"""The SmolLM2 study's analysis (`study`) on synthetic curves of known speed, its lr choice, and its strict JSON."""

from __future__ import annotations

import json

import pytest

from studies.llm_convergence import regenerate
from studies.llm_convergence import study as llm_study


def synthetic(arm: str, seed: int, speed: float, steps: int = 40) -> dict:
    """acc(t) = 0.2 + 0.01 speed t, capped at 0.8; tokens per step 100, one second per step."""
    at = list(range(0, steps + 1, 5))
    return {
        "key": f"main/{arm}/seed{seed}",
        "arm": arm,
        "phase": "main",
        "seed": seed,
        "lr": 1e-4,
        "steps": steps,
        "eval_step": at,
        "eval_tokens": [100 * s for s in at],
        "accuracy": [min(0.8, 0.2 + 0.01 * speed * s) for s in at],
        "time_step_s": [1.0] * steps,
        "samples_per_step": [32.0] * steps,
        "tokens_per_step": [100.0] * steps,
        "no_signal_share": [0.5 if arm == "grpo-n4" else 0.25] * steps,
        "sampled_check": {"exact": 0.5, "sampled": 0.6},
    }


def test_analysis_recovers_a_known_speed_up():
    recs = [synthetic("grpo-n4", s, 1.0) for s in range(4)]
    recs += [synthetic("mopps", s, 2.0 * (1.0 + 0.03 * (s - 1.5))) for s in range(4)]  # 1.91 ... 2.09
    a = llm_study.analyse(recs, [0.2, 0.4, 0.6])
    row = a["table"]["mopps"]
    for axis in ("steps", "tokens", "cpu_s"):
        assert row[axis]["value"] == pytest.approx(2.0, rel=0.05)
        assert row[axis]["t_lo"] < row[axis]["value"] < row[axis]["t_hi"]
    assert all(v["value"] == pytest.approx(2.0, rel=0.1) for v in row["tokens_per_target"].values())
    ref_x = a["table"]["grpo-n4"]["tokens_to_target"]["0.6"]["median"]
    assert row["tokens_to_target"]["0.6"]["median"] == pytest.approx(ref_x / 2, rel=0.1)
    assert row["no_signal_vs_reference"]["value"] == pytest.approx(0.5)
    assert row["samples_per_step"] == 32.0 and row["sampled_minus_exact"]["mean"] == pytest.approx(0.1)
    reg = {
        "instrument": {
            "seeds": [0, 1, 2, 3, 4],
            "steps": 40,
            "eval_prompts": 1,
            "eval": "exact",
            "batch_size": 1,
            "max_new_tokens": 1,
        },
        "claim": [{"figure": "L1", "arm": "mopps"}, {"figure": "L2", "arm": "mopps"}],
    }
    head = llm_study.headline(a, reg, {"committed": True}, {k: reg["instrument"][k] for k in reg["instrument"]})
    assert head["L1"]["value"] == pytest.approx(2.0, rel=0.05) and head["L1"]["status"] == "partial"
    assert "4 of 5" in head["L1"]["missing"] and head["L1"]["preregistered"] is True
    assert llm_study.headline(None, reg, {}, {})["L2"]["status"] == "unmeasured"
    assert "process_s" not in row  # records without per-step process time: no such axis


def test_process_time_axis_and_seeds_without_a_factor_count_against_the_arm():
    """Per-step process CPU seconds are an axis where every record has them (L2p); a seed whose curves share less
    than `min_gain` with GRPO-n4's has no factor and is listed, not silently dropped (found in review)."""
    recs = [{**synthetic("grpo-n4", s, 1.0), "process_s": [1.0] * 40} for s in range(3)]
    recs += [{**synthetic("mopps", s, 2.0), "process_s": [1.0] * 40} for s in range(2)]
    recs += [{**synthetic("mopps", 2, 0.02), "process_s": [1.0] * 40}]  # gains 0.008 in 40 steps: noise
    a = llm_study.analyse(recs, [0.2, 0.4, 0.6], min_gain=0.03)
    row = a["table"]["mopps"]
    assert row["process_s"]["value"] == pytest.approx(2.0, rel=0.05) and row["process_s"]["undefined"] == 1
    reg = {
        "instrument": {
            "seeds": [0, 1, 2],
            "steps": 40,
            "eval_prompts": 1,
            "eval": "exact",
            "batch_size": 1,
            "max_new_tokens": 1,
        },
        "claim": [{"figure": "L1", "arm": "mopps"}, {"figure": "L2p", "arm": "mopps"}],
    }
    head = llm_study.headline(a, reg, {"committed": True}, {k: reg["instrument"][k] for k in reg["instrument"]})
    assert head["L1"]["status"] == "complete" and head["L1"]["undefined_seeds"] == [2]
    assert "count against the arm" in head["L1"]["note"] and head["L2p"]["value"] == pytest.approx(2.0, rel=0.05)
    with_default = llm_study.analyse(recs, [0.2, 0.4, 0.6])  # 1e-4: the noise-sized gain gets a factor
    assert with_default["table"]["mopps"]["tokens"]["undefined"] == 0


def test_time_factors_name_the_seeds_timed_on_different_cpus():
    """A study continued on another machine pairs step seconds from two CPUs: tokens and steps do not care, the
    seconds factors do, and the analysis names those seeds (seen when a session moved from an Intel to an AMD host)."""

    def on(rec, *cpus):
        return {**rec, "sessions": [{"cpu": f"{c}, 2 cores, torch 2.13.0+cpu, 1 threads"} for c in cpus]}

    recs = [on(synthetic("grpo-n4", s, 1.0), "Intel Xeon") for s in range(4)]
    recs += [on(synthetic("mopps", 0, 2.0), "Intel Xeon"), on(synthetic("mopps", 1, 2.0), "AMD EPYC")]
    recs += [on(synthetic("mopps", 2, 2.0), "Intel Xeon", "AMD EPYC"), synthetic("mopps", 3, 2.0)]  # 3: no record
    a = llm_study.analyse(recs, [0.2, 0.4, 0.6])
    assert a["table"]["mopps"]["machines_differ"] == [1, 2] and a["table"]["grpo-n4"]["machines_differ"] == []
    assert llm_study.machines(recs[-3]) == ("AMD EPYC, 2 cores",) and llm_study.machines({}) == ()
    from reinforce_ada.training.warm_start import machine  # the line the runs record: its CPU part, no torch part

    (here,) = llm_study.machines({"sessions": [{"cpu": machine()}]})
    assert here in machine() and "torch" not in here
    reg = {
        "instrument": {
            "seeds": [0, 1, 2, 3],
            "steps": 40,
            "eval_prompts": 1,
            "eval": "exact",
            "batch_size": 1,
            "max_new_tokens": 1,
        },
        "claim": [{"figure": "L1", "arm": "mopps"}, {"figure": "L2", "arm": "mopps"}],
    }
    head = llm_study.headline(a, reg, {"committed": True}, {k: reg["instrument"][k] for k in reg["instrument"]})
    assert head["L2"]["machines_differ"] == [1, 2] and "different CPUs" in head["L2"]["machines_note"]
    assert "machines_differ" not in head["L1"] and head["L2"]["preregistered"] is True


def test_lr_choice_and_edge():
    def run(lr, gain):
        return {"lr": lr, "eval_tokens": [0, 10, 20], "accuracy": [0.1, 0.1 + gain, 0.1 + gain]}

    assert llm_study.chosen_lr([run(1e-4, 0.1), run(2e-4, 0.3), run(4e-4, 0.2)])["edge"] is None
    top = llm_study.chosen_lr([run(1e-4, 0.1), run(2e-4, 0.2), run(4e-4, 0.3)])
    assert top["lr"] == 4e-4 and top["edge"] == "high"


def test_results_json_is_strict_json():
    """NaN, inf and numpy scalars are written as JSON (null, plain numbers), never as bare NaN."""
    import numpy as np

    out = regenerate._clean({"a": float("nan"), "b": [np.float32(0.5), np.int64(3), float("inf")], "c": "x"})
    assert out == {"a": None, "b": [0.5, 3, None], "c": "x"}
    json.loads(json.dumps(out, allow_nan=False))
