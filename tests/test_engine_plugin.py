"""An engine written outside the package tree, registered with one line, works through the CLI (issue 38).

The engine is `HFEngine`'s round-mode loop under another name, in a file of its own (tmp_path, not the package),
counting its `generate` calls so each test can tell it was the one used. Registered with `register_engine`, it is
listed by `train --help-all` and `eval --help`, selected by `--generation.engine` and by a TOML `[generation]` table,
trains for a step through `reinforce_ada.cli.main` and samples for `eval --engine`; registered as CONTRIBUTING says
(`ENGINES["foo"] = Foo`, or a "module:Class" path) it builds and keeps the contract. Registration errors name the
value and what is valid.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.cli.flags import train_config_from_args
from reinforce_ada.cli.main import build_parser
from reinforce_ada.engines import ENGINES, Capabilities, EngineSpec, build_engine, engine_class, register_engine
from reinforce_ada.engines.config import GenerationConfig, RolloutConfig
from reinforce_ada.engines.ray_cluster import check_resources, connect
from reinforce_ada.errors import ConfigError
from reinforce_ada.training.config import load_toml
from tests.test_engine_contract import check_contract

ENGINE_FILE = '''
"""HFEngine's round-mode decode loop under another name, counting its calls: an engine kept outside the package."""
from reinforce_ada.engines.hf import HFEngine


class CountingEngine(HFEngine):
    calls = 0

    def generate(self, requests):
        CountingEngine.calls += 1
        return super().generate(requests)
'''


def load_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def counting(tmp_path):
    f = tmp_path / "counting_engine.py"
    f.write_text(ENGINE_FILE)
    cls = load_file(f, "counting_engine").CountingEngine
    register_engine("counting", cls)  # the one line
    yield cls
    ENGINES.pop("counting", None)


def tiny_train(model_dir: Path, run: Path) -> list[str]:
    return [
        "train",
        "--model.path",
        str(model_dir),
        "--model.threads",
        "1",
        "--task.train_size",
        "16",
        "--task.eval_size",
        "2",
        "--generation.max_new_tokens",
        "4",
        "--strategy",
        "uniform",
        "--n",
        "2",
        "--batch-size",
        "2",
        "--eval-every",
        "0",
        "--steps",
        "1",
        "--run-dir",
        str(run),
        "--run.progress",
        "false",
    ]


def help_of(capsys, *argv: str, flag: str = "--help") -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, flag])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare on single spaces


def test_outside_engine_is_listed_and_selected_by_flag_and_by_toml(counting, tmp_path, capsys):
    train_help = help_of(capsys, "train", flag="--help-all")  # [generation] and [rollout]: behind --help-all
    assert "--generation.engine STR one of hf, vllm, counting or auto" in train_help
    assert "--rollout.engine STR one of hf, vllm, counting (default hf)" in train_help
    assert "one of counting, hf, vllm" in help_of(capsys, "eval")

    cfg = train_config_from_args(build_parser().parse_args(["train", "--generation.engine", "counting"]))
    assert cfg.generation.engine == cfg.engine == "counting"
    preset = tmp_path / "preset.toml"
    preset.write_text('[generation]\nengine = "counting"\n\n[rollout]\nengine = "counting"\n')
    cfg = load_toml(preset)
    assert cfg.generation.engine == cfg.engine == cfg.rollout.engine == "counting"


def test_outside_engine_trains_through_the_cli_and_serves_eval(counting, model_dir, tmp_path, capsys):
    preset = tmp_path / "preset.toml"
    preset.write_text('[generation]\nengine = "counting"\n')
    run = tmp_path / "run"
    assert main([*tiny_train(model_dir, run), "--config", str(preset)]) == 0
    assert counting.calls >= 1, "the trainer sampled with another engine"
    assert load_toml(run / "config.toml").generation.engine == "counting"
    trained = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert trained[-1]["step"] == 1 and trained[-1]["samples_generated"] == 4
    capsys.readouterr()  # the run's report

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3)))
    before = counting.calls
    argv = ["eval", "--model", str(model_dir), "--engine", "counting", "--dataset", str(data), "--samples", "2"]
    argv += ["--max-new-tokens", "2", "--threads", "1", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["eval_prompts"] == 3
    assert counting.calls >= before + 2, "eval must sample (and decode greedily) with the registered engine"


def test_outside_engine_from_the_command_line_trains(counting, model_dir, tmp_path):
    assert main([*tiny_train(model_dir, tmp_path / "run"), "--generation.engine", "counting"]) == 0
    assert counting.calls >= 1


def test_outside_engine_keeps_the_contract(counting, tiny_llama, char_tokenizer, model_dir):
    check_contract("counting", False, tiny_llama, char_tokenizer, model_dir)


def test_engines_takes_a_class_or_a_module_path(counting, monkeypatch, tmp_path, tiny_llama, char_tokenizer):
    monkeypatch.setitem(ENGINES, "foo", counting)  # CONTRIBUTING's line: a class
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(ENGINES, "bar", "counting_engine:CountingEngine")  # or a path, imported on first use
    assert engine_class("foo") is counting and engine_class("bar").__name__ == "CountingEngine"
    spec = EngineSpec(max_new_tokens=3, batch_size=2)
    assert type(build_engine("foo", spec, model=tiny_llama, tokenizer=char_tokenizer)) is counting


class NoBuild:
    capabilities = Capabilities()

    def build(self, spec):  # an instance method: `build_engine` calls it on the class
        return self


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("Foo", "x:Y", r"engine name 'Foo' must be lower-case letters"),
        ("auto", "x:Y", r"engine name 'auto' .*not one of \['auto'\]"),
        ("hf", "x:Y", r"engine name 'hf' is taken by reinforce_ada.engines.local:LocalEngine; pass replace=True"),
        ("foo", "no_colon", r"engine 'foo': 'no_colon' is not a class or a 'module:Class' path"),
        ("foo", object(), r"engine 'foo': <object object at .*> is not a class"),
        ("foo", dict, r"engine 'foo' \(builtins:dict\) must declare `capabilities = Capabilities\(...\)`"),
        ("foo", NoBuild, r"engine 'foo' \(.*NoBuild\) must declare .*a classmethod `build"),
    ],
)
def test_registration_errors_name_the_value_and_what_is_valid(name, value, needle):
    with pytest.raises(ConfigError, match=needle):
        register_engine(name, value)
    assert "foo" not in ENGINES


def test_an_unimportable_path_is_named_on_first_use(monkeypatch):
    monkeypatch.setitem(ENGINES, "gone", "no_such_module_here:Engine")
    with pytest.raises(ConfigError, match=r"engine 'gone' \(no_such_module_here:Engine\) cannot be imported"):
        engine_class("gone")
    with pytest.raises(ConfigError, match=r"generation.engine='nope' is not valid; choose one of \['auto', 'hf'"):
        GenerationConfig(engine="nope")


def test_importing_the_package_and_its_engines_imports_no_backend():
    code = (
        "import sys, reinforce_ada, reinforce_ada.engines\n"
        "from reinforce_ada.engines import engine_class\n"
        "engine_class('vllm')\n"
        "assert 'vllm' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


# -- ray cluster ------------------------------------------------------------------------------------------------------
# Ray clusters that cannot hold or be reached are clear errors at once, not a wait forever (issue 21, Ray).
TWO_NODES = [{"CPU": 4.0, "GPU": 1.0}, {"CPU": 2.0}]


def test_a_worker_larger_than_any_node_is_refused():
    with pytest.raises(ConfigError, match=r"rollout.cpus_per_worker=8.*largest node.*4 CPUs"):
        check_resources(RolloutConfig(workers=1, cpus_per_worker=8), TWO_NODES)
    with pytest.raises(ConfigError, match=r"rollout.gpus_per_worker=2.*largest node.*1 GPUs"):
        check_resources(RolloutConfig(workers=1, gpus_per_worker=2), TWO_NODES)


def test_workers_that_do_not_fit_together_are_refused():
    check_resources(RolloutConfig(workers=3, cpus_per_worker=2), TWO_NODES)  # 2 on the first node, 1 on the second
    with pytest.raises(ConfigError, match=r"rollout.workers=4 x rollout.cpus_per_worker=2 .*fit only 3"):
        check_resources(RolloutConfig(workers=4, cpus_per_worker=2), TWO_NODES)
    # 3 CPUs a worker: 5 CPUs are free in all, but no node holds two workers
    with pytest.raises(ConfigError, match="fit only 1"):
        check_resources(RolloutConfig(workers=2, cpus_per_worker=3), TWO_NODES)
    check_resources(RolloutConfig(workers=12, cpus_per_worker=0.5), TWO_NODES)
    check_resources(RolloutConfig(workers=2, cpus_per_worker=0), [])  # asks for nothing: nothing to check


@pytest.mark.parametrize(
    ("address", "error", "hint"),
    [
        ("auto", ConnectionError("Could not find any running Ray instance."), "ray start --head"),
        ("ray://127.0.0.1:1", ConnectionError("ray client connection timeout"), "host and port"),
    ],
)
def test_an_unreachable_cluster_names_rollout_address(monkeypatch, address, error, hint):
    ray = pytest.importorskip("ray")
    calls = []

    def refuse(**kwargs):
        calls.append(kwargs)
        raise error

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(ConfigError, match=rf"rollout.address='{address}': no Ray cluster could be reached.*{hint}"):
        connect(RolloutConfig(workers=1, address=address))
    assert calls[0]["address"] == address
