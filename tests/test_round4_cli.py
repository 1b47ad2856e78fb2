"""Issue 52 round 4 on the command line's surface, the cases the corpus of command lines
(`tests/adversarial/cli/cases.toml`, `test_cli_bounds.py::test_cli_case`) cannot hold: plugins, tasks and settings
built in Python, links between inputs and outputs, and memory bounds on a pretend machine. Each failed on 0.4.
"""

from __future__ import annotations

import doctest
import os
import subprocess
import sys

import pytest

from reinforce_ada import tasks
from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import STRATEGIES
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.tasks.registry import TASKS, TaskSpec, register_task
from reinforce_ada.training.config import GenerationConfig, RunConfig, TrainConfig

GB = 2**30

# --- plugins -------------------------------------------------------------------------------------------------------


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


def test_the_pool_files_a_compare_reads_are_found():
    from reinforce_ada.cli import compare

    assert doctest.testmod(compare).failed == 0


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
