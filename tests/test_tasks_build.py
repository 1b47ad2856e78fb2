"""`tasks.build`: task names, templates and default verifiers wired from the config."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import build
from reinforce_ada.tasks.templates import PAPER_SUFFIX
from reinforce_ada.training.config import TaskConfig


def test_file_task_with_paper_template(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"What is {i}+1?", "answer": str(i + 1)}) + "\n" for i in range(10)))
    train, held_out, verifier = build(TaskConfig(name="file", path=str(f), eval_size=2, template="paper"))
    assert len(train) == 8 and len(held_out) == 2
    assert all(p.text.rstrip().endswith("Assistant:") or PAPER_SUFFIX in p.text for p in train)
    assert verifier(" 3 ", "3") == 1.0  # files default to the exact verifier


def test_task_config_errors():
    with pytest.raises(ConfigError, match="gsm_symbolic"):
        TaskConfig(name="gsm8k")
    with pytest.raises(ConfigError, match="task.path"):
        TaskConfig(name="file")
    with pytest.raises(ConfigError, match="paper"):
        TaskConfig(template="fancy")


def test_task_max_prompt_chars_reaches_the_file_loader(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": "x" * (50 + i), "answer": str(i)}) + "\n" for i in range(4)))
    train, held_out, _ = build(TaskConfig(name="file", path=str(f), eval_size=1, max_prompt_chars=100))
    assert len(train) + len(held_out) == 4
    with pytest.raises(ConfigError, match="row 2, column 'prompt'.*limit is 50"):
        build(TaskConfig(name="file", path=str(f), eval_size=1, max_prompt_chars=50))
    with pytest.raises(ConfigError, match="task.max_prompt_chars"):
        TaskConfig(max_prompt_chars=0)


def test_a_broken_replacements_file_is_a_config_error(tmp_path):
    import shutil

    from reinforce_ada.tasks import gsm_symbolic

    real = sorted((gsm_symbolic.fetch_templates() / "symbolic").glob("*.toml"))[0]
    shutil.copy(real, tmp_path / real.name)
    (tmp_path / "replacements.json").write_text("{not json")
    with pytest.raises(ConfigError, match="replacements.json: not valid JSON"):
        gsm_symbolic.load_templates(tmp_path)
