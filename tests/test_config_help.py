"""One help convention for every config section (issue 49, 3): each field of `[model]`, `[task]`, `[generation]`,
`[optim]`, `[run]`, `[rollout]`, `[replay]` is `option(default, help)`, as strategy options are; `run.report_to`'s
help comes from the tracker table, and the trainer parses `run.report_to` once."""

from __future__ import annotations

import ast
import inspect
from dataclasses import fields

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.training import trackers
from reinforce_ada.training.config import SECTIONS, field_docs
from tests.helpers import train_config

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
