"""`gpu_paper`: the GPU cost model holds the paper's Table 3 (issue 40). The defaults are the fit; the 1.5B row's
ratios are within 20% (three fitted, Seq-balance a check); the check barely moves with the assumed length model; the
pool's rows match the paper's Fig. 5; and pricing every round like the first cannot reach Table 3."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from reinforce_ada.bench.costmodel import GpuCost
from studies.compute_to_target import gpu_paper


def test_the_defaults_are_the_fit():
    got, want = gpu_paper.fit(), GpuCost()
    for f in dataclasses.fields(GpuCost):
        assert getattr(got, f.name) == pytest.approx(getattr(want, f.name), rel=2e-3), f.name


def test_table3_ratios_within_20_percent():
    res = gpu_paper.compare()["1.5B"]
    for arm, r in res.items():
        assert abs(r["error"]) <= 0.20, (arm, r)
    assert [a for a, r in res.items() if r["fitted"]] == ["grpo", "seq-pos", "est"]
    for arm in gpu_paper.FITTED:  # solved exactly, in seconds too
        assert res[arm]["seconds"] == pytest.approx(gpu_paper.TABLE3[arm], abs=0.1)  # the defaults: 4 digits
    check = res["seq-bal"]  # nothing fitted to it: the model says 2.38x where the paper measured 2.84x
    assert not check["fitted"] and check["ratio"] == pytest.approx(2.38, abs=0.01) and check["paper_ratio"] > 2.8
    assert res["seq-pos"]["ratio"] < check["ratio"]  # balance keeps more prompts active: more rows later


def test_the_7b_row_by_transfer_is_stated_not_tuned():
    res = gpu_paper.compare()["7B"]
    assert res["grpo"]["seconds"] == pytest.approx(236.0)
    assert abs(res["est"]["error"]) <= 0.20  # 1.44x against 1.62x
    assert 0.25 < res["seq-pos"]["error"] < 0.40 and 0.20 < res["seq-bal"]["error"] < 0.35  # the README's miss
    assert "| 7B | seq-pos | 455 | 1.93 | 1.41 | +37% | check |" in gpu_paper.table()


def test_the_check_barely_moves_with_the_assumed_lengths():
    steps = gpu_paper.paper_steps()
    for mean in (300.0, 500.0, 800.0):
        for sigma in (0.3, 0.5, 1.0):
            cost = gpu_paper.fit(GpuCost(mean_tokens=mean, length_sigma=sigma), steps)
            t = gpu_paper.step_times(cost, steps)
            assert t["seq-bal"] / t["grpo"] == pytest.approx(2.38, abs=0.1), (mean, sigma)


def test_every_round_priced_like_the_first_cannot_reach_table3():
    # without a per-step cost, GRPO and Est leave every round's straggler near the cap: both Seq 3.4-3.5x
    steps = gpu_paper.paper_steps()
    old_like = gpu_paper.fit(
        GpuCost(step_s=0.0, prefill_s=0.0), steps, ("decode_step_s", "row_token_s"), ("grpo", "est")
    )
    t = gpu_paper.step_times(old_like, steps)
    assert 3.3 < t["seq-pos"] / t["grpo"] < t["seq-bal"] / t["grpo"] < 3.6


def test_the_pool_gives_the_paper_fig5_sampling():
    from reinforce_ada.sampling.configure import strategy_config
    from reinforce_ada.simulation.plan import plan

    steps = gpu_paper.paper_steps()
    assert steps["grpo"] == ([2048.0], 2048.0) and steps["est"] == ([4096.0], 4096.0)
    for arm in ("seq-pos", "seq-bal"):
        rows = steps[arm][0]
        assert rows[0] == pytest.approx(4096) and rows == sorted(rows, reverse=True)
        assert 1000 <= sum(rows[1:]) <= 6000  # extra samples a step (Fig. 5: 1,000-6,000)
    unresolved = sum(r.unresolved for r in plan(strategy_config("seq", exit="balanced"), gpu_paper.RATES))
    assert 25 <= unresolved <= 55  # Seq-balance's prompts left unresolved after four rounds (Fig. 5: 25-55 of 512)
    assert np.mean(gpu_paper.RATES) == pytest.approx(3.5 / 16, abs=0.002)
