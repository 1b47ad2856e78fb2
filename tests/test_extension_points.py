"""A strategy and a task written outside the package tree, each registered with one line, work everywhere.

The strategy is GRPO-n under another name with an option of its own (`group_weight`), in a file of its own (tmp_path,
not the package) that registers it with one line: it is configured from the command line and from a TOML file, shown
in `--help`, planned, simulated, trained for a step and run as a `compare` arm with no other edit. The task is a
loader in a file of its own, registered with one `register_task` line: trained on and evaluated by name. Through an
entry point or `--plugin` the CLI sees the strategy too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada.bench.arms import resolve_arms
from reinforce_ada.bench.run import run_job
from reinforce_ada.bench.testbed import build_pool, parse_pool
from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.datasets import DATASETS, load_dataset
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import STRATEGIES, register_strategy, strategy_class
from reinforce_ada.simulation.plan import plan
from reinforce_ada.simulation.simulate import simulate
from reinforce_ada.tasks.registry import TASKS, register_task
from reinforce_ada.training.config import TrainConfig, apply_overrides, load_toml
from reinforce_ada.training.trainer import Trainer
from tests.helpers import bench_job

STRATEGY_FILE = '''
"""GRPO-n under another name, with an option of its own: kept outside reinforce_ada's package."""
from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import Options, option
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.strategies import register_strategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


@dataclass(frozen=True)
class PlainOptions(Options):
    group_weight: float = option(1.0, "multiply every group's loss weight by this", plan=False)

    def __post_init__(self):
        super().__post_init__()
        if not self.group_weight > 0:
            raise ConfigError(f"group_weight={self.group_weight} must be > 0")


class PlainGroups(PoolStrategy):
    traits = Traits(streams=False, planner="group")
    Options = PlainOptions

    def batch_end(self, pid):
        return self.opts.n

    def on_batch(self, pid):
        return True

    def build(self):
        w = self.opts.group_weight
        return [
            Group(self.prompts[p], list(pool), [float(s.reward) for s in pool], weight=w)
            for p, pool in self.pools.items()
        ]

    def metrics(self):
        return {**super().metrics(), "plain_group_weight": self.opts.group_weight}


register_strategy("plain_groups", PlainGroups, replace=True)  # the one line
'''

TASK_FILE = '''
"""Doubling: 'k*2=' -> str(2k), a task of one's own."""
from reinforce_ada.types import Prompt


def split(task):
    prompts = [Prompt(id=f"dbl-{k}", text=f"{k}*2=", answer=str(2 * k), level=1) for k in range(40)]
    return prompts[:32], prompts[32:]
'''


def load_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def plugin(tmp_path):
    f = tmp_path / "plain_groups.py"
    f.write_text(STRATEGY_FILE)
    yield f
    STRATEGIES.pop("plain_groups", None)


@pytest.fixture
def foo(plugin):
    load_file(plugin, "plain_groups")  # the file registers its strategy itself
    return "plain_groups"


@pytest.fixture
def doubling(tmp_path):
    from reinforce_ada.tasks.registry import TaskSpec

    f = tmp_path / "doubling.py"
    f.write_text(TASK_FILE)
    mod = load_file(f, "doubling")
    register_task(TaskSpec("doubling", "k*2= -> 2k", "exact", split=mod.split))  # the one line
    yield "doubling"
    TASKS.pop("doubling", None)


def test_outside_strategy_is_planned_simulated_trained_and_compared(
    foo, model_dir, tmp_path, tiny_llama, char_tokenizer
):
    cfg = strategy_config(name=foo, n=4)
    assert cfg.options.advantage == "group" and cfg.options.scale_std and cfg.options.group_weight == 1.0
    rows = plan(cfg, [0.1, 0.5])
    assert rows[0].zero_signal == pytest.approx(0.9**4 + 0.1**4) and rows[1].expected_samples == 4
    sim = simulate([foo, "uniform"], steps=3, seeds=1, batch_size=8, pool_size=64)
    assert sim["arms"][foo]["summary"] == sim["arms"]["uniform"]["summary"]  # the same algorithm, the same law
    run = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 64, "eval_size": 4},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"name": foo, "n": 2, "group_weight": 0.5},
        },
        "test",
    )
    tr = Trainer(run, tensorboard=False)
    m = tr.train_step()
    tr.close()
    assert tr.step == 1 and not run.streaming and m["plain_group_weight"] == 0.5
    arms, skipped = resolve_arms(["grpo-n4", f"mine={foo}:n=2,group_weight=0.5"])
    assert not skipped and arms[1].cfg.name == foo and arms[1].cfg.options.group_weight == 0.5
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    rec = run_job(bench_job(pool, model_dir, tmp_path / "cmp", "mine", arms[1].cfg, steps=1, eval_every=1))
    assert rec["samples_per_step"] == [8]


def test_outside_task_is_trained_and_evaluated_by_name(doubling, model_dir, tmp_path):
    run = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"name": doubling},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"name": "uniform", "n": 2},
        },
        "test",
    )
    tr = Trainer(run, tensorboard=False)
    tr.fit()
    assert tr.step == 1
    assert doubling in DATASETS
    ds = load_dataset(doubling, run.task)
    assert ds.verifier == "exact" and [p.answer for p in ds.prompts][:2] == ["64", "66"]


def test_outside_option_from_the_command_line_a_toml_file_and_help(plugin, model_dir, tmp_path, capsys):
    """`--plugin FILE` registers the strategy; its own option is a flag, a TOML key and a `--help` line."""
    with pytest.raises(SystemExit) as e:
        main(["--plugin", str(plugin), "train", "--strategy", "plain_groups", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "plain_groups options" in text and "--group-weight" in text and "loss weight" in text
    assert "--k-pos" not in text  # seq's options are not plain_groups'
    run = tmp_path / "run"
    argv = ["train", "--plugin", str(plugin), "--strategy", "plain_groups", "--group-weight", "0.25", "--n", "2"]
    small = ["--model.path", str(model_dir), "--model.threads", "1", "--task.train_size", "64", "--task.eval_size", "4"]
    small += ["--generation.max_new_tokens", "4", "--batch-size", "4", "--steps", "1", "--eval-every", "0"]
    assert main([*argv, *small, "--run-dir", str(run), "--run.progress", "false"]) == 0
    saved = load_toml(run / "config.toml")
    assert (saved.strategy.name, saved.strategy.options.group_weight, saved.strategy.options.n) == (
        "plain_groups",
        0.25,
        2,
    )
    line = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert line["plain_group_weight"] == 0.25
    preset = tmp_path / "plain.toml"
    preset.write_text('[strategy]\nname = "plain_groups"\ngroup_weight = 2.0\n')
    assert load_toml(preset).strategy.options.group_weight == 2.0
    preset.write_text('[strategy]\nname = "plain_groups"\ngroup_weight = -1.0\n')
    with pytest.raises(ConfigError, match="group_weight=-1.0 must be > 0"):
        load_toml(preset)
    with pytest.raises(ConfigError, match="group_weight .an option of plain_groups.: not an option of strategy 'seq'"):
        strategy_config("seq", group_weight=2.0)
    capsys.readouterr()
    assert main(["--plugin", str(plugin), "plan", "--strategy", "plain_groups", "--pass-rates", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["expected_samples"] == 4.0


def test_registration_errors_are_clear(foo):
    with pytest.raises(ConfigError, match="taken"):
        register_strategy(foo, strategy_class("uniform"))
    with pytest.raises(ConfigError, match="not a subclass"):
        register_strategy("bar", object)
    with pytest.raises(ConfigError, match="name='nope' is not valid"):
        strategy_config(name="nope")

    class Clash(strategy_class("uniform")):  # one name, one type: an option's type cannot differ between strategies
        Options = dataclasses.make_dataclass(
            "ClashOptions",
            [("n", str, dataclasses.field(default="4"))],
            bases=(strategy_class("uniform").Options,),
            frozen=True,
        )

    with pytest.raises(ConfigError, match="option 'n' is declared"):
        register_strategy("clash", Clash)


def test_a_strategy_without_traits_fails_at_class_creation():
    from reinforce_ada.sampling.protocol import PoolStrategy

    with pytest.raises(TypeError, match="declares no `traits"):

        class NoTraits(PoolStrategy):
            pass

    class Base(PoolStrategy, abstract=True):  # an intermediate base may opt out
        pass


@pytest.mark.slow
def test_cli_sees_an_entry_point_strategy(tmp_path):
    (tmp_path / "plain_groups.py").write_text(STRATEGY_FILE)
    dist = tmp_path / "plain_groups-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plain-groups\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[reinforce_ada.strategies]\nplain_groups = plain_groups:PlainGroups\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-m", "reinforce_ada", "plan", "--strategy", "plain_groups", "--pass-rates", "0.5", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert '"expected_samples": 4.0' in out.stdout


def test_every_registered_task_builds_its_config_and_help():
    from reinforce_ada.cli.flags import table_help

    helps = table_help()
    for name, spec in TASKS.items():
        if spec.trainable:
            assert name in helps["task.name"]
            assert dataclasses.replace(TrainConfig().task, name=name, path="x.jsonl").name == name
