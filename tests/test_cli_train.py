"""What a new user hit with `train` (issue 49, 7), and the run folder checked once: the embedded model trains on a
file of prompts it can read (and refuses one it cannot, naming the flag), a batch larger than the pool is said and
recorded as what ran, `eval` names a run's held-out file as `--dataset` does, and `train` checks the folder once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.training.config import load_toml

SMALL = ["--model.threads", "1", "--generation.max_new_tokens", "6", "--eval-every", "0", "--run.progress", "false"]


def sums(path: Path, n: int, bos: bool = True) -> Path:
    rows = [{"prompt": f"{'<bos>' if bos else ''}{10 + i}+{20 + i}=", "answer": str(30 + 2 * i)} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_embedded_model_trains_on_a_file_it_can_read_and_a_batch_above_the_pool_is_recorded(tmp_path, capsys):
    data, run = sums(tmp_path / "sums.jsonl", 12), tmp_path / "run"
    argv = ["train", "--task.name", "file", "--task.path", str(data), "--task.eval_size", "2", "--batch-size", "64"]
    assert main([*argv, "--steps", "1", "--run-dir", str(run), *SMALL]) == 0
    err = capsys.readouterr().err
    assert "run.batch_size=64 is more than the 10 training prompts; each step trains all 10" in err
    assert load_toml(run / "config.toml").run.batch_size == 10  # what ran, not what was asked
    assert load_toml(run / "config.toml").model.path is None  # the embedded model, no --model.path
    step = json.loads((run / "metrics.jsonl").read_text().splitlines()[1])
    assert step["step"] == 1 and step["prompts"] == 10  # the batch the config records is the one that ran
    assert main(["train", "--resume", str(run), "--steps", "2", *SMALL]) == 0  # the recorded batch resumes as is
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(run), "--samples", "1", "--no-greedy", "--threads", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # the run's held-out rows, named after their file as --dataset names it
    assert list(out["datasets"]) == ["sums (held-out rows)"]


@pytest.mark.parametrize(
    "rows, expect",
    [
        (
            [{"prompt": "How much is 2+3?", "answer": "5"}] * 4,
            r"holds '\?Hchimosuw', which the embedded model cannot read.*--model.path FOLDER",
        ),
        ([{"prompt": "<bos>2+3=", "answer": "5"}, {"prompt": "2€3=", "answer": "5"}], "holds '€'"),
    ],
)
def test_a_file_the_embedded_model_cannot_read_is_refused_naming_the_flag(rows, expect, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({**r, "id": str(i)}) + "\n" for i, r in enumerate(rows)))
    argv = ["train", "--task.name", "file", "--task.path", str(data), "--task.eval_size", "1", "--batch-size", "2"]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--steps", "1", "--run-dir", str(tmp_path / "run"), *SMALL])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # one line (a busy machine may add a note before it)
    assert e.value.code == 2 and last.startswith("reinforce-ada train: error:") and re.search(expect, last), last
    assert not (tmp_path / "run").exists()  # a run that never started leaves no folder


def test_prompts_without_bos_are_counted_and_other_tasks_name_model_path(tmp_path, capsys):
    data = sums(tmp_path / "plain.jsonl", 6, bos=False)
    argv = ["train", "--task.name", "file", "--task.path", str(data), "--task.eval_size", "1", "--batch-size", "2"]
    assert main([*argv, "--steps", "1", "--run-dir", str(tmp_path / "run"), *SMALL]) == 0
    assert "6 of 6 prompts of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["train", "--task.name", "gsm_symbolic", "--steps", "1", "--run-dir", str(tmp_path / "g"), *SMALL])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--model.path FOLDER" in err and "models/data/tiny-arithmetic" in err


def test_train_checks_the_run_folder_once(tmp_path, model_dir, monkeypatch, capsys):
    from reinforce_ada.training import run_dir

    run = tmp_path / "run"
    base = ["train", "--model.path", str(model_dir), "--task.train_size", "16", "--task.eval_size", "2"]
    base += ["--batch-size", "2", "--run-dir", str(run), *SMALL]
    assert main([*base, "--steps", "1"]) == 0
    calls: dict[str, list] = {"check_no_links": [], "check_saved_config": []}
    for name in calls:
        real = getattr(run_dir, name)
        monkeypatch.setattr(run_dir, name, lambda *a, _n=name, _f=real: calls[_n].append(a[0]) or _f(*a))
    assert main(["train", "--resume", str(run), "--steps", "2", *SMALL]) == 0
    assert [len(v) for v in calls.values()] == [1, 1], calls
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2"]) == 0  # nothing to do, and the folder is let go
    assert "already reached step 2" in capsys.readouterr().out
    run_dir.RunLock(run).release()


def test_a_trainer_given_another_folders_lock_refuses_it(tmp_path, model_dir):
    from reinforce_ada.training.run_dir import RunLock
    from reinforce_ada.training.trainer import Trainer
    from tests.helpers import train_config

    (tmp_path / "other").mkdir()
    lock = RunLock(tmp_path / "other")
    with pytest.raises(ValueError, match="not run.run_dir"):
        Trainer(train_config(model_dir, tmp_path / "run"), lock=lock)
    lock.release()


def test_a_run_folder_that_holds_another_run_is_refused_before_torch_is_imported(tmp_path):
    from tests.test_cli_late import run_cli

    run = tmp_path / "taken"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    out, err = run_cli(["train", "--run-dir", str(run), "--steps", "1"], tmp_path)
    assert out == {"rc": 2, "torch": False, "transformers": False}, err
    assert "already holds a run" in err and "--resume" in err
