"""Issue 21, the command-line part of the second adversarial round: every bad flag value, unusable path or request too
big for memory that was a traceback, a hang or silently accepted is now exit status 2 with one line naming the flag,
the value and what is valid, before any work starts (`cli/checks.py`).

The command lines themselves are the corpus `tests/adversarial/cli/cases.toml` (`test_cli_case`); the tests below
check what a corpus regex cannot: the exact largest values on a pretend 1 GB machine, the library-level checks, and
that the fixed paths still work."""

from __future__ import annotations

import doctest
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada import tasks
from reinforce_ada.cli import checks, main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import STRATEGIES
from reinforce_ada.simulation.plan import MAX_PLAN_SAMPLES, plan, plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig
from reinforce_ada.simulation.simulate import simulate
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.tasks.registry import TASKS, TaskSpec, register_task
from reinforce_ada.training.config import GenerationConfig, RunConfig, TrainConfig
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

# --- (was tests/test_round4_cli.py) -----------------------------------------------------------------------------------
# Issue 52 round 4 on the command line's surface, the cases the corpus of command lines
# (`tests/adversarial/cli/cases.toml`, `test_cli_bounds.py::test_cli_case`) cannot hold: plugins, tasks and settings
# built in Python, links between inputs and outputs, and memory bounds on a pretend machine. Each failed on 0.4.


def test_a_plugin_calling_sys_exit_at_import_is_an_error_naming_it(tmp_path, capsys):
    """It made the command exit 0 having done nothing."""
    plugin = tmp_path / "quits.py"
    plugin.write_text("import sys\nsys.exit(0)\n")
    assert main(["--plugin", str(plugin), "plan", "--pass-rates", "0.5"]) == 2
    err = capsys.readouterr().err
    assert f"--plugin {plugin} called sys.exit(0) while being imported" in err and "Traceback" not in err


def test_a_plugin_raising_keyboard_interrupt_at_import_is_one_line(tmp_path):
    """It printed a raw traceback through importlib (run in a process of its own: the interrupt is real)."""
    plugin = tmp_path / "interrupts.py"
    plugin.write_text("raise KeyboardInterrupt\n")
    out = subprocess.run(
        [sys.executable, "-m", "reinforce_ada", "--plugin", str(plugin), "plan", "--pass-rates", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert f"interrupted while importing --plugin {plugin}; the command did not run" in out.stderr


def test_a_plugin_calling_sys_exit_0_while_the_command_runs_is_not_success(tmp_path, capsys):
    """A plugin's code that exits 0 mid-command (here a strategy's cost hint, read by `plan`) ended the command with
    status 0 and no output."""
    plugin = tmp_path / "quits_later.py"
    plugin.write_text(
        "import sys\n"
        "from reinforce_ada.sampling.strategies import register_strategy\n"
        "from reinforce_ada.sampling.strategies.uniform import Uniform\n"
        "class QuitsLater(Uniform):\n"
        "    @classmethod\n"
        "    def cost_hint(cls, opts):\n"
        "        sys.exit(0)\n"
        "register_strategy('quits_later', QuitsLater)\n"
    )
    try:
        with pytest.raises(SystemExit) as e:
            main(["--plugin", str(plugin), "plan", "--strategy", "quits_later", "--pass-rates", "0.5"])
    finally:
        STRATEGIES.pop("quits_later", None)
    err = capsys.readouterr().err
    assert e.value.code == 1 and "the command did not complete" in err and f"--plugin {plugin}" in err


@pytest.fixture
def empty_task():
    spec = register_task(
        TaskSpec("empty_plugin_task", "a plugin task with no prompts", "exact", split=lambda task: ([], []))
    )
    yield spec
    TASKS.pop(spec.name, None)


def test_an_empty_plugin_task_says_it_has_no_prompts(empty_task):
    """It read as "every training prompt is longer than the context" once the model had loaded."""
    with pytest.raises(ConfigError, match="task.name='empty_plugin_task': the task has no training prompts"):
        tasks.build(TaskConfig(name="empty_plugin_task"))


def test_an_empty_plugin_benchmark_says_it_has_no_prompts(empty_task):
    from reinforce_ada.evaluation.datasets import load_dataset

    with pytest.raises(ConfigError, match="--dataset empty_plugin_task: the benchmark 'empty_plugin_task' has no"):
        load_dataset("empty_plugin_task", TaskConfig())


# --- outputs that overwrite inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_an_output_reaching_the_dataset_through_a_link_is_refused(tmp_path, model_dir, capsys, link):
    """The same file by another name (`os.path.samefile`): the dataset is left as it was."""
    data = tmp_path / "a.jsonl"
    data.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    other = tmp_path / "other.jsonl"
    (os.symlink if link == "symlink" else os.link)(data, other)
    with pytest.raises(SystemExit) as e:
        main(["filter", "--model", str(model_dir), "--dataset", str(data), "--out", str(other)])
    assert e.value.code == 2 and "is the --dataset file" in capsys.readouterr().err
    assert data.read_text() == '{"prompt": "1+1=", "answer": "2"}\n'


def test_the_pool_files_a_compare_reads_are_found_and_a_budget_may_read_1e6():
    from reinforce_ada.cli import checks, compare

    assert doctest.testmod(compare).failed == 0 and doctest.testmod(checks).failed == 0


# --- what an option costs ------------------------------------------------------------------------------------------


def test_step_draws_are_sized_against_usable_memory_not_the_machine(monkeypatch):
    """A 1 TB machine whose process may use 1 GiB: the draws are checked against the 1 GiB (`cpu_load`)."""
    from reinforce_ada import cpu_load
    from reinforce_ada.training import bounds

    monkeypatch.setattr(cpu_load, "physical_memory", lambda: 2**40)
    monkeypatch.setattr(bounds, "usable_memory", lambda: GB)
    strategy = strategy_config("uniform", n=1000)
    run = RunConfig(batch_size=16)
    TrainConfig(strategy=strategy, run=run, generation=GenerationConfig(max_new_tokens=8))
    # 16 prompts x 1000 samples x (1024 + 80 x 512) bytes = 672 MB fits; x 2048 tokens (164,864 B a sample) does not
    with pytest.raises(ConfigError, match=r"strategy.n=1000 with run.batch_size=16 .* the largest n here is 407"):
        TrainConfig(strategy=strategy, run=run, generation=GenerationConfig(max_new_tokens=2048))


def test_a_budget_caps_the_draws_it_is_checked_with(monkeypatch):
    """Est draws at most `budget` a step, whatever max_samples allows: a small budget with a large max_samples fits."""
    from reinforce_ada.training import bounds

    monkeypatch.setattr(bounds, "usable_memory", lambda: GB)
    gen = GenerationConfig(max_new_tokens=8)
    big = dict(n=4, max_samples=10**9, min_samples=1)
    TrainConfig(strategy=strategy_config("est", budget=4096, **big), run=RunConfig(batch_size=16), generation=gen)
    with pytest.raises(ConfigError, match=r"strategy.max_samples=1000000000 .* a step may draw up to 1.6e\+10"):
        TrainConfig(strategy=strategy_config("est", **big), run=RunConfig(batch_size=16), generation=gen)


def test_reasoning_gym_sizes_are_bounded_wherever_a_split_is_made():
    """`task.train_size` 1e9 generated questions one by one for days; the bound holds for the `[task]` config, the
    split itself and the compact compare pool, before reasoning-gym is imported."""
    from reinforce_ada.bench.testbed import parse_pool
    from reinforce_ada.tasks import reasoning, reasoning_pool

    assert reasoning.MAX_GENERATED == 100_000
    TaskConfig(name="reasoning_gym:mix", train_size=4096, eval_size=256)
    with pytest.raises(ConfigError, match=r"task.train_size=99000 and task.eval_size=256 \(5 levels\)"):
        TaskConfig(name="reasoning_gym:mix", train_size=99_000, eval_size=256)
    with pytest.raises(ConfigError, match="must be <= 100,000"):
        reasoning.make_split("leg_counting", train_size=10**9, eval_size=0, seed=0)
    with pytest.raises(ConfigError, match="would generate more than 100,000 questions"):
        reasoning_pool.make_split(train_size=10**9)
    with pytest.raises(ConfigError, match="at most 100,000 reasoning-gym prompts"):
        parse_pool("rg=reasoning_gym:size=1000000000")


# --- one reader for user files -------------------------------------------------------------------------------------


def test_a_rates_file_reads_as_the_other_user_files(tmp_path):
    """Bare numbers and objects in JSONL, a JSON array, a byte-order mark, U+2028 inside a string, and the file
    `filter --rates` writes (id, prompt, pass_rate): the one reader's rules (`userfiles`)."""
    from reinforce_ada.cli.plan import read_rates_file

    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('0.5\n{"pass_rate": 0.25, "prompt": "a\u2028b"}\n\n', encoding="utf-8")
    assert read_rates_file(jsonl) == [0.5, 0.25]
    array = tmp_path / "r.json"
    array.write_text('[0.5, {"p": 1}]')
    assert read_rates_file(array) == [0.5, 1.0]
    csv = tmp_path / "r.csv"
    csv.write_bytes('\ufeffid,prompt,pass_rate\na,"x, y",0.125\n'.encode())
    assert read_rates_file(csv) == [0.125]
    txt = tmp_path / "r.txt"
    txt.write_text("0.5\n")
    with pytest.raises(ConfigError, match=r"--pass-rates-file .*r.txt must be .jsonl, .json or .csv"):
        read_rates_file(txt)
