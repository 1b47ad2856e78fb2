"""A strategy and a task written outside the package tree, each registered with one line, work everywhere.

The strategy is a copy of `uniform` under another name in a file of its own (tmp_path, not the package): it is
planned, simulated, trained for a step and run as a `compare` arm with no other edit. The task is a loader in a file
of its own, registered with one `register_task` line: trained on and evaluated by name. Through an entry point the
CLI sees the strategy too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada.bench.arms import resolve_arms
from reinforce_ada.bench.run import Job, run_job
from reinforce_ada.bench.testbed import build_pool, parse_pool
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.datasets import DATASETS, load_dataset
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.strategies import STRATEGIES, register_strategy, strategy_class
from reinforce_ada.simulation.plan import plan
from reinforce_ada.simulation.simulate import simulate
from reinforce_ada.tasks.registry import TASKS, register_task
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.trainer import Trainer

STRATEGY_FILE = '''
"""GRPO-n under another name: a copy of reinforce_ada's uniform strategy, kept outside the package."""
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.types import Group


class PlainGroups(PoolStrategy):
    traits = Traits(baseline="group", streams=False, spends_budget=False, planner="group", reads=("n",))

    def batch_end(self, pid):
        return self.cfg.n

    def on_batch(self, pid):
        return True

    def build(self):
        return [Group(self.prompts[p], list(pool), [float(s.reward) for s in pool]) for p, pool in self.pools.items()]
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
def foo(tmp_path):
    f = tmp_path / "plain_groups.py"
    f.write_text(STRATEGY_FILE)
    cls = load_file(f, "plain_groups").PlainGroups
    register_strategy("plain_groups", cls)  # the one line
    yield "plain_groups"
    STRATEGIES.pop("plain_groups", None)


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
    cfg = StrategyConfig(name=foo, n=4)
    assert cfg.resolved_advantage == "group" and cfg.resolved_scale_std
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
            "strategy": {"name": foo, "n": 2},
        },
        "test",
    )
    tr = Trainer(run, tensorboard=False)
    tr.fit()
    assert tr.step == 1 and not run.streaming
    arms, skipped = resolve_arms(["grpo-n4", f"mine={foo}:n=2"])
    assert not skipped and arms[1].cfg.name == foo
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    rec = run_job(
        Job(
            pool="p",
            arm="mine",
            strategy=arms[1].cfg,
            lr=1e-3,
            seed=0,
            steps=1,
            batch_size=4,
            eval_every=1,
            model_path=str(model_dir),
            train_path=pool.train_path,
            eval_path=pool.eval_path,
            level_weights=pool.level_weights,
            run_dir=str(tmp_path / "cmp"),
            check_samples=0,
        )
    )
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


def test_registration_errors_are_clear(foo):
    with pytest.raises(ConfigError, match="taken"):
        register_strategy(foo, strategy_class("uniform"))
    with pytest.raises(ConfigError, match="not a subclass"):
        register_strategy("bar", object)
    with pytest.raises(ConfigError, match="name='nope' is not valid"):
        StrategyConfig(name="nope")


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
