"""Issue 40: a command checks its flags and files before it imports torch or transformers (on a busy machine those
imports took 45-107 s before a typo was refused), and `eval` / `filter` pick their threads as `train` does."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.training.config import load_toml

PROBE = """
import json, sys
from reinforce_ada.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
print(json.dumps({"rc": rc, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def run_cli(argv: list[str], cwd: Path) -> tuple[dict, str]:
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


CASES = [
    (["train", "--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    (["train", "--optim.lr", "abc"], "optim.lr='abc' is not a valid float"),
    (["train", "--optim.agg", "mean"], "optim.agg='mean' is not valid"),
    (["train", "--resume", "{tmp}/a", "--run-dir", "{tmp}/b"], "--run-dir .*/b would be ignored"),
    (["eval", "--model", "{tmp}/none"], "not a Hugging Face model folder"),
    (["eval", "--model", "{model}", "--dataset", "x={tmp}/missing.jsonl"], "missing.jsonl"),
    (["eval", "--model", "{model}", "--device", "tpu"], "--device 'tpu' is not a device"),
    (["filter", "--model", "{model}", "--dataset", "{tmp}/missing.jsonl", "--out", "{tmp}/o.jsonl"], "missing"),
    (["features", "--model", "{model}", "--dataset", "{tmp}/missing.jsonl", "--out", "{tmp}/o.jsonl"], "missing"),
    (["features", "--model", "{model}", "--dataset", "d.jsonl", "--out", "o.jsonl", "--temperature", "inf"], "got inf"),
    (["features", "--model", "{model}", "--dataset", "d.jsonl", "--out", "o.jsonl", "--device", "tpu"], "'tpu'"),
    (["plan", "--pass-rates", "abc"], "--pass-rates must be comma-separated numbers"),
    (["simulate", "--steps", "0"], "--steps must be >= 1"),
]


@pytest.mark.parametrize("argv, error", CASES, ids=[" ".join(a[:2] + a[-2:]) for a, _ in CASES])
def test_a_bad_flag_or_file_is_refused_before_torch_is_imported(argv, error, tmp_path):
    import re

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # enough to pass as a model folder: nothing is loaded
    argv = [a.format(tmp=tmp_path, model=model) for a in argv]
    out, err = run_cli(argv, tmp_path)
    assert out["rc"] == 2 and re.search(error, err), err
    assert not out["torch"] and not out["transformers"], f"{argv}: imported torch/transformers before refusing"


def test_eval_and_filter_lower_their_threads_on_a_busy_machine_as_train_does(monkeypatch, capsys):
    """`eval` and `filter` kept 2 threads at load 20-40 (a warning only): now the default is lowered to the free
    cores, as `train` does, and an explicit --threads is kept."""
    from reinforce_ada import cpu_load
    from reinforce_ada.cli.evaluate import torch_threads

    monkeypatch.setattr(cpu_load, "_warned", False)
    monkeypatch.setattr(cpu_load.os, "getloadavg", lambda: (30.0, 30.0, 30.0))
    monkeypatch.setattr(cpu_load.os, "cpu_count", lambda: 2)
    assert torch_threads(argparse.Namespace(threads=None), on_cpu=True) == 1
    assert "using 1 torch thread instead of 2" in capsys.readouterr().err
    monkeypatch.setattr(cpu_load, "_warned", False)
    assert torch_threads(argparse.Namespace(threads=2), on_cpu=True) == 2
    assert torch_threads(argparse.Namespace(threads=None), on_cpu=False) == 2


def test_the_configs_aggregation_names_are_the_losses():
    from reinforce_ada.training.config import AGGREGATION_NAMES
    from reinforce_ada.training.losses import AGGREGATIONS

    assert set(AGGREGATION_NAMES) == set(AGGREGATIONS)


def test_a_flag_typo_is_one_line_naming_the_command_and_the_closest_flags(capsys):
    from reinforce_ada.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", "--prior-fiel", "x"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("reinforce-ada train: error:")
    assert "unrecognized arguments: --prior-fiel (did you mean --prior-file" in err
    assert err.rstrip().endswith("(all flags: reinforce-ada train --help)")


def test_warnings_print_as_one_line_without_a_source_line(monkeypatch):
    """The shipped example eval file used to warn (duplicate rows) as Python does: file, line number, code line."""
    import warnings

    from reinforce_ada.cli.main import one_line_warning

    assert (
        one_line_warning("3 row(s) repeat", UserWarning, "files.py", 310) == "reinforce-ada: warning: 3 row(s) repeat\n"
    )
    assert one_line_warning("old", FutureWarning, "x.py", 1).startswith("reinforce-ada: FutureWarning: old")
    import importlib

    cli = importlib.import_module("reinforce_ada.cli.main")  # the module (reinforce_ada.cli.main is also a function)
    seen = []  # `plan` declares its flags and body in its own module (cli.plan); its parser is built at each call
    monkeypatch.setattr(
        importlib.import_module("reinforce_ada.cli.plan"),
        "cmd_plan",
        lambda args: seen.append(warnings.formatwarning) or 0,
    )
    before = warnings.formatwarning
    assert cli.main(["plan", "--pass-rates", "0.5"]) == 0
    assert seen == [one_line_warning] and warnings.formatwarning is before  # the command's only


def test_the_shipped_example_files_hold_no_duplicate_and_no_held_out_question():
    import warnings

    from reinforce_ada.tasks.files import load_prompts

    root = Path(__file__).parent.parent / "examples" / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a duplicate-rows warning fails here
        train = load_prompts(root / "word_problems.jsonl", prompt_key="question", answer_key="gold")
        held = load_prompts(root / "word_problems_eval.jsonl", prompt_key="question", answer_key="gold")
    assert not {p.text for p in train} & {p.text for p in held}


def test_progress_bars_write_no_cursor_escapes_where_the_output_is_not_a_terminal():
    import io

    from tqdm.auto import tqdm

    from reinforce_ada.training.tracking import progress_bar

    out = io.StringIO()
    with tqdm(total=2, file=out) as outer:  # compare's bar over runs; the trainer's bar opens inside it
        with progress_bar(True, total=3, file=out) as inner:
            inner.update(3)
        outer.update(2)
    with progress_bar(True, total=3, file=out, position=1) as bar:  # a bar placed by position: nested too
        bar.update(3)
    assert "\x1b[A" not in out.getvalue() and "2/2" in out.getvalue() and "3/3" not in out.getvalue()
    single = io.StringIO()
    with progress_bar(True, total=3, file=single) as bar:  # a bar alone still shows its progress
        bar.update(3)
    assert "3/3" in single.getvalue()


# -- cli train --------------------------------------------------------------------------------------------------------
# What a new user hit with `train` (issue 49, 7), and the run folder checked once: the embedded model trains on a file
# of prompts it can read (and refuses one it cannot, naming the flag), a batch larger than the pool is said and
# recorded as what ran, `eval` names a run's held-out file as `--dataset` does, and `train` checks the folder once.
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
