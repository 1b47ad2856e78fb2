"""report.png on a task without difficulty levels, and TensorBoard tags grouped by section (issue 25)."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.report import make_report
from reinforce_ada.training.tracking import read_metrics, tb_tag
from reinforce_ada.training.trainer import Trainer


def test_tags_are_grouped():
    assert tb_tag("eval_accuracy_L3") == "eval/eval_accuracy_L3"
    assert tb_tag("samples_generated") == "train/samples_generated"
    assert tb_tag("worker0_busy_s") == "rollout/worker0_busy_s"


@pytest.mark.filterwarnings("ignore:task.eval_path is unset")
def test_file_task_report_shows_completion_lengths_instead_of_an_empty_level_panel(model_dir, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"q": f"{i}+1=", "a": str(i + 1)}) + "\n" for i in range(12)))
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"name": "file", "path": str(data), "prompt_key": "q", "answer_key": "a", "eval_size": 4},
            "generation": {"max_new_tokens": 3},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 2, "batch_size": 2, "eval_every": 1, "progress": False},
            "strategy": {"name": "uniform", "n": 2},
        },
        "test",
    )
    Trainer(cfg, tensorboard=False).fit()
    rows = read_metrics(tmp_path / "run")
    assert all("tokens_generated" in r for r in rows if "samples_generated" in r)
    out = make_report(tmp_path / "run")
    assert out.exists() and out.stat().st_size > 10_000
