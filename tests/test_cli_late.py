"""Issue 40: a command checks its flags and files before it imports torch or transformers (on a busy machine those
imports took 45-107 s before a typo was refused), and `eval` / `filter` pick their threads as `train` does."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

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
