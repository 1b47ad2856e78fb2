"""Issue 21, the command-line part of the second adversarial round: every bad flag value, unusable path or request too
big for memory that was a traceback, a hang or silently accepted is now exit status 2 with one line naming the flag,
the value and what is valid, before any work starts (`cli/checks.py`).

The command lines themselves are the corpus `tests/adversarial/cli/cases.toml` (`test_cli_case`); the tests below
check what a corpus regex cannot: the exact largest values on a pretend 1 GB machine, the library-level checks, and
that the fixed paths still work."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from reinforce_ada.cli import checks, main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.simulation.plan import MAX_PLAN_SAMPLES, plan, plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig
from reinforce_ada.simulation.simulate import simulate
from tests.helpers import corpus, corpus_header

GB = 2**30
CASES = corpus("cli")


def fails(argv: list[str], capsys) -> str:
    """The one-line error of a command that must exit with status 2 (no traceback)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.fixture
def small_machine(monkeypatch):
    """A machine with 1 GB of memory, so the largest allowed values in the messages are exact."""
    monkeypatch.setattr(checks, "usable_memory", lambda: GB)


# --- the corpus ----------------------------------------------------------------------------------------------------


def test_every_case_has_a_readme_line():
    readme = corpus_header("cli")
    for name, case in CASES.items():
        assert f"| `{name}` |" in readme, f"tests/adversarial/cli/cases.toml's header does not list {name}"
        assert case["why"] and case["argv"][0] in ("plan", "simulate", "eval", "filter", "compare", "features", "train")


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_case(name, tmp_path, model_dir, capsys):
    case = CASES[name]
    if "needs" in case and not Path(case["needs"]).exists():
        pytest.skip(f"needs {case['needs']}")
    (tmp_path / "file").write_text("")
    (tmp_path / "taken.json").mkdir()
    (tmp_path / "kept.png").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
    elif "{tmp}/fifo" in case["argv"]:
        pytest.skip("needs os.mkfifo")
    for fname, text in case.get("files", {}).items():
        (tmp_path / fname).write_bytes(text.encode(case.get("encoding", "utf-8")))
    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3)))
    before = sorted(p.name for p in tmp_path.iterdir())
    subst = {"{tmp}": str(tmp_path), "{model}": str(model_dir), "{data}": str(data)}
    argv = [_subst(a, subst) for a in case["argv"]]
    err = fails(argv, capsys)
    assert re.search(case["error"], err), f"{name}: {err!r} does not match {case['error']!r}"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # failed before writing anything


def _subst(arg: str, subst: dict[str, str]) -> str:
    for key, value in subst.items():
        arg = arg.replace(key, value)
    return arg


# --- plan ----------------------------------------------------------------------------------------------------------


def test_plan_monte_carlo_reps_are_checked_before_allocating(small_machine, capsys):
    # default seq: max_samples 32, 600 B per sample: 1 GB holds 55,924 reps of one rate, 27,962 of two
    err = fails(["plan", "--pass-rates", "0.5", "--monte-carlo", "1000000000"], capsys)  # was a MemoryError
    assert "--monte-carlo 1000000000" in err and "the largest --monte-carlo here is 55924" in err
    err = fails(["plan", "--pass-rates", "0.5,0.1", "--monte-carlo", "30000"], capsys)
    assert "the largest --monte-carlo here is 27962" in err
    assert "--monte-carlo must be >= 0, got -5" in fails(["plan", "--pass-rates", "0.5", "--monte-carlo", "-5"], capsys)
    with pytest.raises(ConfigError, match="reps"):
        plan_monte_carlo(strategy_config(), [0.5], reps=0)


def test_monte_carlo_intervals_never_print_a_negative_zero(capsys):
    """Issue 21: `±-0.0000` (from a negative --monte-carlo, now refused); p = 0 and 1 give an exact 0 interval."""
    assert main(["plan", "--strategy", "uniform", "--pass-rates", "0,1", "--monte-carlo", "20"]) == 0
    out = capsys.readouterr().out
    assert out.count("±0.0000") == 2 and "±-" not in out


def test_plan_answers_at_its_largest_max_samples():
    """The cap is where the binomial laws still fit a float: pilot-commit's and seq's laws at 1024 draws."""
    for cfg in (
        strategy_config(name="pilot_commit", max_samples=MAX_PLAN_SAMPLES),
        strategy_config(name="seq", max_samples=MAX_PLAN_SAMPLES, samples_per_round=MAX_PLAN_SAMPLES),
    ):
        (row,) = plan(cfg, [0.5])
        assert math.isfinite(row.expected_samples) and 0.0 <= row.zero_signal <= 1.0


# --- simulate ------------------------------------------------------------------------------------------------------


def test_simulate_sizes_are_checked_before_the_first_step(small_machine, tmp_path, capsys):
    out = ["--out", str(tmp_path / "s")]
    # 3 arms x 2048 B per step of one seed: 1 GB holds 174,762 steps; then 3 seeds of 100 steps: 1 GB / 614,400 B
    err = fails(["simulate", "--steps", "1000000000000", *out], capsys)  # was memory growing without end
    assert "--steps 1000000000000" in err and "the largest --steps here is 174762" in err
    assert "the largest --seeds here is 1747" in fails(["simulate", "--seeds", "10000", *out], capsys)
    err = fails(["simulate", "--pool-size", "10000000000", *out], capsys)
    assert "the largest --pool-size here is 1048576" in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write into a read-only folder")
def test_simulate_refuses_a_read_only_folder_before_the_run(tmp_path, capsys):
    """Issue 21: the run finished, then writing its results failed (the corpus covers /proc, which refuses root too)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        err = fails(["simulate", "--steps", "1", "--seeds", "1", "--out", str(ro / "sub" / "s")], capsys)
    finally:
        ro.chmod(0o755)
    assert f"cannot write in {ro} (Permission denied)" in err


def test_simulation_library_checks():
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ConfigError, match="SimConfig.lr must be a finite number >= 0"):
            SimConfig(lr=bad)
    with pytest.raises(ConfigError, match="pool_size must be >= 1, got 0"):
        simulate(["uniform"], steps=1, seeds=1, batch_size=1, pool_size=0)
    with pytest.raises(ConfigError, match="no arms"):
        simulate([], steps=1, seeds=1, batch_size=1, pool_size=4)


# --- eval and filter -----------------------------------------------------------------------------------------------


@pytest.fixture
def data(tmp_path) -> Path:
    f = tmp_path / "a.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3)))
    return f


def _eval(model_dir: Path, data: Path, *flags: str) -> list[str]:
    return [
        "eval",
        "--model",
        str(model_dir),
        "--dataset",
        str(data),
        "--samples",
        "1",
        "--max-new-tokens",
        "2",
        "--threads",
        "1",
        "--no-greedy",
        *flags,
    ]


def test_eval_sizes_are_checked_against_memory_before_the_model_loads(small_machine, model_dir, data, capsys):
    """The tiny Llama caches 2 x 2 layers x 2 heads x 16 dims x 4 B = 512 B per token and sequence; a sample takes
    1024 B + 80 B per token. At 1 token, k samples of 3 prompts need 3k x 1104 B + min(512, 3k) x 512 B."""
    assert checks.kv_bytes_per_token(model_dir) == 512
    err = fails(_eval(model_dir, data, "--samples", "1000000000"), capsys)  # was a MemoryError
    assert err.startswith("reinforce-ada eval: error: --samples 1000000000: 3 prompts x 1000000000 samples")
    assert f"the largest --samples here is {(GB - 512 * 512) // (3 * 1104)}" in err
    # 1 sample of 3 prompts, 3 sequences decoded together: 3 x (1024 + 80 t) + 3 x 512 t B for t new tokens
    err = fails(_eval(model_dir, data, "--max-new-tokens", "1000000000"), capsys)  # tried to allocate 3 TB
    assert f"the largest --max-new-tokens here is {(GB - 3 * 1024) // (3 * 80 + 3 * 512)}" in err
    assert "loading" not in capsys.readouterr().err


def test_eval_writes_into_a_missing_folder(model_dir, data, tmp_path, capsys):
    out, md = tmp_path / "new" / "r.json", tmp_path / "other" / "deeper" / "r.md"
    assert main(_eval(model_dir, data, "--out", str(out), "--markdown", str(md))) == 0  # was FileNotFoundError
    assert json.loads(out.read_text())["eval_prompts"] == 3 and "| a | 3 |" in md.read_text()


# --- compare -------------------------------------------------------------------------------------------------------
