"""A short `compare` says, before its tables and on its figure, that its factors are a smoke test and where the
registered results are; it reads its own intervals against the horizon it ran (`bench.evidence`); its figure's
legend covers no plot (issue 49, 7)."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.bench import analysis, compute, evidence, report
from reinforce_ada.bench import compare as bench_compare
from reinforce_ada.bench.arms import ORACLES, UNIFORM
from reinforce_ada.cli import main
from tests.test_compare import g, record


def run(arm, seed, k, steps, every):
    x = np.arange(0, steps + 1, every)
    acc = g(k * x).tolist()
    r = {**record(arm, seed, k, steps, 100 * k, 0.3, 0.05), "pool": "hard", "accuracy": acc, "per_level": {"L5": acc}}
    r["eval_step"], r["eval_tokens"] = x.tolist(), (x * 100 * k).tolist()
    return {**r, "sampled_check": {"exact": acc[-1], "sampled": acc[-1]}}


def results(seeds: int, steps: int, every: int, arms: int = 12) -> dict:
    """A comparison's results from synthetic runs: the reference and `arms` arms on one pool."""
    recs = []
    for s in range(seeds):
        recs.append(run("grpo-n4", s, 1.0, 2 * steps, every))
        recs += [run(f"arm-{i}", s, 1.2 + 0.05 * i + 0.03 * s, steps, every) for i in range(arms)]
    summary = analysis.summarize_pool(recs, "grpo-n4", None, steps)
    summary["compute"] = compute.summarize(recs, [], UNIFORM, ORACLES)
    return {
        "config": {"steps": steps, "seeds": seeds, "eval_every": every, "token_budget": None},
        "by_pool": {"hard": summary},
        "runs": {"main": recs},
        "pools": {"hard": {"histogram": [1] * 25, "share_below_0.2": 0.5, "mean": 0.2}},
    }


def test_a_quick_compare_says_its_factors_are_a_smoke_test_before_its_tables():
    quick = results(seeds=3, steps=12, every=4)  # --quick's horizon: 12 steps, 3 seeds, an evaluation every 4
    text = evidence.note(quick)
    first = text.splitlines()[0]
    assert first.startswith("SMOKE TEST, NOT A RESULT: 12 steps x 3 seeds, 3 evaluations per run")
    assert "docs/results/compute_to_target.md" in text and "not evidence of which sampler is faster" in text
    assert "Its own intervals support 0 of 24 factors" in text and "3 evaluations per run < 10" in text
    assert evidence.figure_title(quick).startswith("smoke test (12 steps x 3 seeds")


def test_the_registered_horizon_is_no_smoke_test_and_a_wide_interval_is_named():
    full = results(seeds=9, steps=200, every=10)
    assert not evidence.smoke_test(full) and evidence.note(full) == "" and evidence.figure_title(full) is None
    assert evidence.why_not({"value": 1.3, "lo": 0.6, "hi": 2.9}, 9, 20) == ["interval wider than 2x"]
    assert evidence.why_not({"value": 1.3, "lo": None, "hi": None}, 9, 20) == ["no interval"]
    assert evidence.why_not({"value": 1.3, "lo": 1.1, "hi": 1.5}, 9, 20) == []
    budget = {"steps": 2000, "seeds": 9, "eval_every": 10, "token_budget": 150000, "eval_points": 4}
    assert evidence.evaluations(budget) == 4 and evidence.smoke_test({"config": budget})  # 4 points: too few


def test_the_quick_figure_says_so_and_its_legend_covers_no_plot(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    seen = {}
    real = Figure.savefig

    def keep(fig, *a, **kw):
        fig.canvas.draw()
        seen["fig"] = fig
        return real(fig, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    report.plot(results(seeds=3, steps=12, every=4, arms=30), tmp_path / "quick.png")
    fig = seen["fig"]
    assert fig._suptitle is not None and "not a result" in fig._suptitle.get_text()
    assert not any(a.get_legend() for a in fig.axes)  # no legend inside a panel
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 31  # the reference and 30 arms, once each
    box = legend.get_window_extent()
    for axis in fig.axes:
        if axis.get_visible():
            assert not box.overlaps(axis.get_window_extent()), axis.get_title()
    assert (tmp_path / "quick.png").stat().st_size > 0


@pytest.mark.parametrize("bad", [{"value": 1.2, "lo": 0.0, "hi": 2.0}, {"value": 1.2, "lo": -1.0, "hi": 2.0}])
def test_an_interval_that_is_not_positive_supports_no_factor(bad):
    assert evidence.why_not(bad, 9, 20) == ["no interval"]


def test_compare_quick_prints_the_note_first_and_before_the_run(tmp_path, monkeypatch, capsys):
    from reinforce_ada.bench import compare
    from reinforce_ada.cli import main

    quick = {**results(seeds=3, steps=12, every=4), "testbed": {"sha256": "0" * 64, "matches": True}}
    quick["lr_sweep"] = {"arms": {}}
    seen = []
    monkeypatch.setattr(compare, "run_compare", lambda c: seen.append(c) or quick)
    monkeypatch.setattr(report, "write", lambda *a, **kw: (tmp_path / "q.json", tmp_path / "q.png"))
    assert main(["compare", "--quick", "--out", str(tmp_path / "q")]) == 0
    out, err = capsys.readouterr()
    assert seen[0].steps == 12 and err.startswith("SMOKE TEST, NOT A RESULT: 12 steps x 3 seeds")  # before the run
    assert out.startswith("SMOKE TEST, NOT A RESULT") and out.index("Its own intervals") < out.index("testbed weights")


# -- compare records flag ---------------------------------------------------------------------------------------------
# `compare --records` names a folder: a file there (or in its way) is refused naming the flag before any run (issue
# 52: it was a FileExistsError after the training).
@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_compare_records_naming_a_file_is_refused_before_any_run(where, tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(bench_compare, "run_compare", lambda c: pytest.fail("it ran"))
    argv = ["compare", "--quick", "--records", str(tmp_path / where), "--out", str(tmp_path / "out" / "r")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--records" in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
