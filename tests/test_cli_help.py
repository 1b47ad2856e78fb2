"""The command line reads top to bottom (issue 49, 3): each command declares its flags beside its body, `--help`
shows the chosen strategy's own options, the common ones and the most-used sections (`--help-all`: every flag), and
every flag parses whether `--help` lists it or not."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.cli.flags import train_config_from_args
from reinforce_ada.cli.main import COMMANDS, build_parser
from reinforce_ada.errors import ConfigError
from reinforce_ada.training import trackers
from reinforce_ada.training.config import SECTIONS, field_docs
from tests.helpers import train_config

CLI = Path(__file__).resolve().parents[1] / "src" / "reinforce_ada" / "cli"
STRATEGIES = ["uniform", "dynamic", "seq", "est", "pilot_commit", "knapsack", "greso", "mopps", "conformal", "spo"]


def help_text(capsys, monkeypatch, *argv: str, flag: str = "--help", columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit) as e:
        main([*argv, flag])
    assert e.value.code == 0
    return capsys.readouterr().out


def entries(group: str) -> list[str]:
    """The help entries of a group's text, each on one line (argparse wraps long ones)."""
    return [" ".join(e.split()) for e in re.split(r"\n(?=  -)", "\n" + group) if e.strip()]


def test_no_function_of_the_command_line_is_over_80_lines_and_build_parser_is_a_loop():
    long = {}
    for f in CLI.glob("*.py"):
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80:
                long[f"{f.name}:{n.name}"] = n.end_lineno - n.lineno + 1
    assert not long, f"functions over 80 lines: {long}"
    tree = ast.parse((CLI / "main.py").read_text())
    build = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_parser")
    assert build.end_lineno - build.lineno + 1 <= 30 and "COMMANDS" in ast.unparse(build)


def test_each_command_declares_its_own_flags_beside_its_body():
    parser = build_parser([])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(COMMANDS) == len(sub.choices) == 9
    for module in COMMANDS:
        assert module.__name__.startswith("reinforce_ada.cli.") and callable(module.add_parser)
    for name, sp in sub.choices.items():  # the body a command runs lives in the module that declared its flags
        fn = sp.get_default("fn")
        assert fn.__module__ in {m.__name__ for m in COMMANDS}, name
        assert fn.__name__ == f"cmd_{name}", name


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_train_help_fits_200_lines_and_help_all_lists_every_flag(strategy, capsys, monkeypatch):
    brief = help_text(capsys, monkeypatch, "train", "--strategy", strategy)
    full = help_text(capsys, monkeypatch, "train", "--strategy", strategy, flag="--help-all")
    assert len(brief.splitlines()) <= 200, len(brief.splitlines())
    assert brief.startswith("usage: reinforce-ada train [--strategy NAME]") and len(full) > 2 * len(brief)
    parser = build_parser(["train", "--strategy", strategy])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    visible = [a for a in sub._actions if a.help is not argparse.SUPPRESS]
    flat = " ".join(full.split())
    for action in visible:  # every flag the parser shows, in --help-all
        assert all(o in flat for o in action.option_strings), action.option_strings
    hidden = [a for g in sub._action_groups if g.title in sub.more for a in g._group_actions]
    assert hidden and not any(o in brief for a in hidden for o in a.option_strings if o.startswith("--optim."))
    said = re.search(r"(\d+) more flags \((.*)\): reinforce-ada train --help-all", " ".join(brief.split()))
    assert said and int(said[1]) == len(hidden) and "[optim]" in said[2] and "[generation]" in said[2]
    for shown in ("--strategy NAME", "--threshold", "--n ", "--model.path", "--task.name", "--steps", "--run-dir"):
        assert shown in brief, shown


def test_spo_help_shows_the_shared_options_it_changes_as_its_own(capsys, monkeypatch):
    text = help_text(capsys, monkeypatch, "train", "--strategy", "spo", columns=300)
    own = text.split("\nspo options:\n", 1)[1].split("\n\n", 1)[0]
    spo = {"--n": "1", "--advantage": "tracker", "--batch-normalize": "samples", "--select": "priority"}
    spo |= {"--prior-alpha": "0.5", "--prior-beta": "0.5", "--prior-decays": "True", "--scale-std": "False"}
    for flag, default in spo.items():
        entry = next(e for e in entries(own) if e.startswith(flag + " "))
        assert entry.endswith(f"(default {default})"), entry
    assert "--decay" not in own and "--k-pos" not in text  # a shared option SPO keeps; seq's own
    assert "--decay FLOAT" in help_text(capsys, monkeypatch, "train", "--strategy", "spo", flag="--help-all")
    seq = help_text(capsys, monkeypatch, "train", columns=300)  # the default strategy: seq's own options first
    assert "\nseq options:\n  --samples-per-round" in seq and "--advantage STR" in seq.split("seq options:")[1]


def test_every_flag_parses_whether_help_lists_it_or_not():
    argv = ["train", "--strategy", "spo", "--decay", "0.8", "--optim.lr", "1e-4", "--generation.max_new_tokens", "6"]
    argv += ["--rollout-workers", "0", "--replay.enabled", "true", "--select", "iw", "--iw-mix", "0.2"]
    argv += ["--prior-alpha", "2"]
    cfg = train_config_from_args(build_parser(argv).parse_args(argv))
    assert (cfg.strategy.options.decay, cfg.strategy.options.prior_alpha, cfg.optim.lr) == (0.8, 2.0, 1e-4)
    assert cfg.generation.max_new_tokens == 6 and cfg.replay.enabled and cfg.strategy.options.iw_mix == 0.2


def test_help_all_where_nothing_is_left_out_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--pass-rates", "0.5", "--help-all"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "unrecognized arguments: --help-all" in err
    with pytest.raises(SystemExit) as e:  # a hidden flag mistyped: matched against every flag, not the listed ones
        main(["train", "--optim.lrr", "1"])
    assert e.value.code == 2 and "did you mean --optim.lr" in capsys.readouterr().err


def test_plan_and_simulate_list_every_strategy_option_they_read(capsys, monkeypatch):
    text = help_text(capsys, monkeypatch, "simulate", "--strategy", "spo")
    assert "--help-all" not in text and "--decay" in text and "spo options" in text


def test_plan_header_names_only_the_options_that_differ_from_the_strategys_defaults(capsys):
    assert main(["plan", "--strategy", "uniform", "--pass-rates", "0.5"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "strategy uniform  (its default options)"
    assert main(["plan", "--strategy", "uniform", "--n", "8", "--pass-rates", "0.5"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "strategy uniform  n=8"
    assert main(["plan", "--strategy", "spo", "--n", "1", "--pass-rates", "0.5"]) == 0  # SPO's own default: unsaid
    assert capsys.readouterr().out.splitlines()[0] == "strategy spo  (its default options)"


# --- (was tests/test_config_help.py) ----------------------------------------------------------------------------------
# One help convention for every config section (issue 49, 3): each field of `[model]`, `[task]`, `[generation]`,
# `[optim]`, `[run]`, `[rollout]`, `[replay]` is `option(default, help)`, as strategy options are; `run.report_to`'s
# help comes from the tracker table, and the trainer parses `run.report_to` once.


CLASSES = [type(factory()) for sec, factory in SECTIONS.items() if sec != "strategy"]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_section_field_is_an_option_with_its_help(cls):
    for f in fields(cls):
        assert f.metadata.get("help", "").strip(), f"{cls.__name__}.{f.name} has no help"
    assert field_docs(cls) == {f.name: f.metadata["help"] for f in fields(cls)}
    body = ast.parse(inspect.getsource(cls)).body[0].body  # no second convention: no docstring under a field
    for a, b in zip(body, body[1:], strict=False):
        under = isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)
        assert not (isinstance(a, ast.AnnAssign) and under), f"{cls.__name__}.{a.target.id}: a docstring, not option()"


def test_report_to_help_names_every_tracker_from_the_one_table():
    from reinforce_ada.training.config import RunConfig

    text = RunConfig.__dataclass_fields__["report_to"].metadata["help"]
    assert all(name in text for name in trackers.SINKS) and "none" in text
    assert not hasattr(trackers, "EXTRA")  # the package a tracker needs is its sink's `extra`, beside it
    assert [getattr(s, "extra", None) for s in trackers.SINKS.values()] == [None, "wandb", "mlflow", "trackio"]


def test_the_trainer_parses_report_to_once_before_the_model_loads(tmp_path, model_dir, monkeypatch):
    from reinforce_ada.training import tracking, trainer

    calls = []
    real = tracking.parse_report_to
    monkeypatch.setattr(tracking, "parse_report_to", lambda v: calls.append(v) or real(v))
    tr = trainer.Trainer(train_config(model_dir, tmp_path / "run", run={"report_to": "none"}))
    tr.close()
    assert calls == ["none"] and tr.tracker.config["run"]["report_to"] == "none"

    def no_load(*a, **kw):
        raise AssertionError("the model was loaded before report_to was checked")

    monkeypatch.setattr(trainer, "load_policy", no_load)
    with pytest.raises(ConfigError, match="unknown tracker 'neptune'"):
        trainer.Trainer(train_config(model_dir, tmp_path / "bad", run={"report_to": "tensorboard,neptune"}))
    from reinforce_ada.training.run_dir import RunLock

    RunLock(tmp_path / "bad").release()  # the trainer that could not be built let its folder go
