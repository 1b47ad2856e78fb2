"""Planner closed forms and their agreement with the real strategies run on a frozen simulated policy."""

from __future__ import annotations

import json
import math

import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.simulation.plan import plan, plan_monte_carlo

RATES = [0.0, 0.03, 0.1, 0.3, 0.5, 0.8, 1.0]


@pytest.mark.parametrize("n", [2, 4, 8])
def test_uniform_zero_signal_closed_form(n):
    for row in plan(strategy_config(name="uniform", n=n), RATES):
        assert row.zero_signal == pytest.approx(row.p**n + (1 - row.p) ** n) and row.expected_samples == n


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("uniform", {"n": 1}),  # GRPO's group of one is its own baseline
        ("uniform", {"n": 1, "advantage": "leave_one_out"}),  # no other sample to compare with
        ("seq", {"n": 1, "advantage": "leave_one_out"}),  # Seq keeps n of its pool: no other kept sample
        ("spo", {"advantage": "group"}),
        ("spo", {"advantage": "global"}),  # the whole pool of a strategy that draws n is the group
        ("dynamic", {"n": 1, "advantage": "maxrl"}),
    ],
)
def test_a_baseline_that_a_group_of_one_cannot_have_is_refused_with_the_way_out(name, options):
    with pytest.raises(ConfigError, match=f"advantage='{options.get('advantage', 'group')}' with n=1.*tracker"):
        strategy_config(name, **options)


def test_one_kept_sample_is_fine_where_the_baseline_is_not_the_kept_group():
    assert plan(strategy_config("seq", n=1), [0.5])[0].zero_signal < 1  # global: the whole pool Seq drew
    assert plan(strategy_config("uniform", n=1, advantage="tracker"), [0.5])[0].zero_signal == 0.0
    corrected = plan(strategy_config("seq", n=1, advantage="corrected"), [0.1, 0.5])  # a kept positive of a mixed
    assert [r.zero_signal for r in corrected] == [r.zero_signal for r in plan(strategy_config("seq", n=1), [0.1, 0.5])]
    # pool: 1 - p^2 / (1 - p); none only where the pool agrees, as under the whole pool's mean
    strategy_config("est", n=1, advantage="group")  # an allocator trains what it allocates, not n


@pytest.mark.parametrize(
    ("cfg", "expect"),
    [
        (strategy_config(name="spo"), 0.0),  # one sample per prompt: the group baseline would say 1.0
        (strategy_config(name="uniform", n=2, advantage="tracker"), 0.0),
        (strategy_config(exit="positive", k_pos=1, advantage="tracker"), 0.0),  # seq keeps every pool it ends
        (strategy_config(exit="positive", k_pos=2, advantage="tracker"), 0.0),  # the same by exact enumeration
    ],
)
def test_a_baseline_from_outside_the_group_keeps_every_trained_prompts_signal(cfg, expect):
    assert [r.zero_signal for r in plan(cfg, [0.03, 0.5, 0.9])] == pytest.approx([expect] * 3)


def test_under_the_tracker_only_dropped_uncommitted_or_filtered_prompts_lose_their_signal():
    rates = [0.03, 0.3, 0.9]
    for k_pos in (1, 2):  # closed form (k_pos = 1) and exact enumeration (k_pos = 2): dropped pools only
        rows = plan(strategy_config(exit="positive", k_pos=k_pos, advantage="tracker", unresolved="drop"), rates)
        assert rows[0].method == ("closed_form" if k_pos == 1 else "exact_enumeration")
        assert [r.zero_signal for r in rows] == pytest.approx([r.unresolved for r in rows]) and rows[0].unresolved > 0
    pilot = strategy_config(name="pilot_commit", advantage="tracker", commit_lo=0.0)
    k, lo, hi = pilot.options.pilot, pilot.options.commit_lo, pilot.options.commit_hi
    for row in plan(pilot, rates):  # no signal exactly when the pilot is not committed
        committed = sum(math.comb(k, x) * row.p**x * (1 - row.p) ** (k - x) for x in range(k + 1) if lo <= x / k <= hi)
        assert row.zero_signal == pytest.approx(1.0 - committed)
    for row in plan(strategy_config(name="dynamic", n=4, advantage="tracker"), rates):  # DAPO drops agreeing groups
        assert row.zero_signal == pytest.approx(row.p**4 + (1 - row.p) ** 4)
    oracle = plan(strategy_config(name="uniform", n=4, advantage="tracker", estimator="oracle"), [0.0, 0.5, 1.0])
    assert [r.zero_signal for r in oracle] == [1.0, 0.0, 1.0]  # v_hat = p = every reward at p in {0, 1}


@pytest.mark.parametrize(("m", "rounds"), [(8, 4), (4, 2), (2, 5)])
def test_seq_positive_k1_closed_form(m, rounds):
    cfg = strategy_config(exit="positive", k_pos=1, samples_per_round=m, max_samples=m * rounds, n=min(4, m * rounds))
    for row in plan(cfg, RATES):
        p = row.p
        assert row.unresolved == pytest.approx((1 - p) ** (rounds * m))
        assert row.expected_samples == pytest.approx(m * sum((1 - p) ** (r * m) for r in range(rounds)))
        assert row.method == "closed_form"
    # the enumeration used for every other rule agrees with the closed form
    enum = plan(cfg.replace(max_samples=m * rounds + 1, n=1, advantage="global"), [0.2])[0]
    assert enum.method == "exact_enumeration"


@pytest.mark.parametrize(
    "cfg",
    [
        strategy_config(),  # seq balanced, the paper's defaults
        strategy_config(exit="positive", k_pos=2),
        strategy_config(unresolved="drop"),
        strategy_config(name="uniform"),
        strategy_config(name="est", budget=40, min_samples=2),
        strategy_config(name="spo", select="none"),  # the tracker baseline: the real ledger agrees on "always signal"
        strategy_config(name="uniform", n=2, advantage="tracker"),
        strategy_config(exit="positive", k_pos=2, advantage="tracker", unresolved="drop"),  # the enumeration
        strategy_config(name="dynamic", n=4, advantage="tracker"),  # drops agreeing groups whatever the baseline
        strategy_config(name="est", budget=40, min_samples=2, advantage="tracker"),  # the batch-wide Monte Carlo
    ],
)
@pytest.mark.slow
def test_monte_carlo_agrees_with_exact(cfg):
    rates = [0.03, 0.1, 0.5, 0.9]
    exact = plan(cfg, rates)
    mc = plan_monte_carlo(cfg, rates, reps=3000, seed=1)
    for e, m in zip(exact, mc, strict=True):
        assert abs(e.zero_signal - m.zero_signal) <= 4.5 * max(m.stderr, 1e-3)
        assert m.expected_samples == pytest.approx(e.expected_samples, rel=0.03, abs=0.2)
        if e.unresolved is not None:
            assert m.unresolved == pytest.approx(e.unresolved, abs=4.5 * max(m.stderr, 5e-3))


def test_paper_hard_mix_zero_signal_ratio():
    # mid-points of the paper's hard-set buckets: balanced Ada-Seq leaves far fewer zero-signal prompts than GRPO-n4
    rates = [0.01] * 197 + [0.09] * 617 + [0.3] * 174 + [0.6] * 12
    seq = sum(r.zero_signal for r in plan(strategy_config(), rates)) / len(rates)
    grpo = sum(r.zero_signal for r in plan(strategy_config(name="uniform"), rates)) / len(rates)
    assert seq / grpo < 0.4


def test_plan_cli_json(capsys):
    assert main(["plan", "--strategy", "uniform", "--n", "4", "--pass-rates", "0.5,0.1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [set(r) >= {"p", "zero_signal", "expected_samples", "unresolved"} for r in rows] == [True, True]
    assert rows[0]["zero_signal"] == pytest.approx(0.125)


def test_plan_cli_file_totals(tmp_path, capsys):
    f = tmp_path / "rates.csv"
    f.write_text("p\n0.1\n0.5\n")
    assert main(["plan", "--pass-rates-file", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["totals"]["prompts"] == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"p": 0.1}\n{"q": 2}\n')
    with pytest.raises(SystemExit) as e:
        main(["plan", "--pass-rates-file", str(bad)])
    assert e.value.code == 2 and "bad.jsonl: row 2 has no 'p' or 'pass_rate'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--pass-rates", "0.1,1.2"], "outside [0, 1]"),
        (["plan", "--pass-rates", "0.1", "--k-pos", "40"], "k_pos"),
        (["plan", "--pass-rates", "0.1", "--strategy", "ppo"], "uniform"),
        (["plan", "--pass-rates", "0.1", "--max-samples", "x"], "max_samples"),
        (["plan"], "--pass-rates"),
    ],
)
def test_plan_cli_errors(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_check_rates_names_index():
    with pytest.raises(ConfigError, match="#1"):
        plan(strategy_config(), [0.1, -0.2])
