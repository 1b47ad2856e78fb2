"""A run's life on disk: checkpoints that cannot run code and are verified before use (a damaged one falls back to
the one before), resume that refuses to mix two runs, metrics that survive kills mid-write, an update that would
leave NaN weights rolled back, Ctrl-C that stops at a step boundary with a checkpoint, and disk errors that name
what failed and lose nothing."""

from __future__ import annotations

import copy
import dataclasses
import errno
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.training import checkpoint
from reinforce_ada.training.checkpoint import CheckpointError
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.tracking import Tracker, read_metrics
from reinforce_ada.training.trainer import Trainer


def cfg_for(model_dir: Path, run_dir: Path, *, steps: int = 2, **optim) -> TrainConfig:
    return apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 64, "eval_size": 2},
            "generation": {"max_new_tokens": 4},
            "strategy": {"name": "uniform", "n": 4},
            "optim": optim,
            "run": {
                "run_dir": str(run_dir),
                "steps": steps,
                "batch_size": 2,
                "eval_every": 0,
                "save_every": 1,
                "progress": False,
            },
        },
        "test",
    )


def cli_flags(model_dir: Path) -> list[str]:
    return [
        "--model.path",
        str(model_dir),
        "--model.threads",
        "1",
        "--task.train_size",
        "64",
        "--task.eval_size",
        "2",
        "--generation.max_new_tokens",
        "4",
        "--strategy",
        "uniform",
        "--n",
        "4",
        "--batch-size",
        "2",
        "--eval-every",
        "0",
        "--save-every",
        "1",
        "--run.progress",
        "false",
    ]


@pytest.fixture(scope="module")
def two_step_run(model_dir, tmp_path_factory) -> Path:
    """A finished 2-step run with a checkpoint after each step (kept: 2)."""
    run = tmp_path_factory.mktemp("runs") / "two"
    Trainer(cfg_for(model_dir, run), tensorboard=False).fit()
    return run


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_checkpoints_hold_json_safetensors_and_a_manifest(two_step_run):
    found = checkpoint.complete(two_step_run)
    assert [p.name for p in found] == ["step_000002", "step_000001"]
    for ckpt in found:
        checkpoint.verify(ckpt)
        names = {p.name for p in ckpt.iterdir()}
        assert {"state.json", "state.safetensors", "manifest.json", "model"} <= names and "state.pt" not in names
        listed = json.loads((ckpt / "manifest.json").read_text())["sha256"]
        assert "model/model.safetensors" in listed and len(listed) >= 4


def test_state_pack_round_trips_every_kind_of_value():
    state = {
        "t": torch.arange(6.0).reshape(2, 3),
        "nested": {"a": [1, 2.5, None, True], "tup": (1, "x")},
        "int_keys": {3: "three", 4: torch.ones(2)},
        "__dunder__": 1,
        "b": b"\x00\xff",
    }
    tensors: dict = {}
    back = checkpoint.unpack(json.loads(json.dumps(checkpoint.pack(state, tensors))), tensors)
    assert torch.equal(back["t"], state["t"]) and back["nested"] == state["nested"] and back["b"] == state["b"]
    assert back["int_keys"][3] == "three" and torch.equal(back["int_keys"][4], torch.ones(2))
    assert back["__dunder__"] == 1
    with pytest.raises(TypeError, match="set"):
        checkpoint.pack({"x": {1, 2}}, {})


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_state_is_refused_not_unpickled(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    marker = tmp_path / "pwned"
    for ckpt in checkpoint.complete(run):
        for name in ("state.json", "state.safetensors", "manifest.json"):
            (ckpt / name).unlink()
        (ckpt / "state.pt").write_bytes(pickle.dumps({"x": _RunsCode(marker)}))
    tr = Trainer(cfg_for(model_dir, run), tensorboard=False)
    with pytest.raises(CheckpointError, match=r"state.pt.*arbitrary code"):
        tr.resume()
    assert not marker.exists()


def test_a_bit_flipped_checkpoint_falls_back_to_the_previous_one(model_dir, two_step_run, tmp_path, capsys):
    run = copy_run(two_step_run, tmp_path / "run")
    newest = run / "checkpoints" / "step_000002" / "state.safetensors"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x01
    newest.write_bytes(bytes(data))
    tr = Trainer(cfg_for(model_dir, run), tensorboard=False)
    assert tr.resume() and tr.step == 1
    assert "skipping checkpoint step_000002" in capsys.readouterr().out
    assert [m["step"] for m in read_metrics(run)] == [0, 1]  # step 2 is repeated, so its line is dropped
    tr.fit()  # and the run completes from there
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2]


def test_every_checkpoint_damaged_is_an_error_naming_each(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    (run / "checkpoints" / "step_000002" / "model" / "model.safetensors").write_bytes(b"truncated")
    (run / "checkpoints" / "step_000001" / "manifest.json").write_text("{not json")
    tr = Trainer(cfg_for(model_dir, run), tensorboard=False)
    with pytest.raises(CheckpointError, match=r"(?s)no usable checkpoint.*model.safetensors.*checksum.*damaged"):
        tr.resume()


def test_a_checkpoint_of_another_model_size_is_named_as_such(tiny_llama, char_tokenizer, two_step_run, tmp_path):
    bigger = tmp_path / "bigger"
    config = copy.deepcopy(tiny_llama.config)
    config.hidden_size = 48  # the session's tiny Llama, one size up
    LlamaForCausalLM(config).save_pretrained(bigger)
    char_tokenizer.save_pretrained(bigger)
    run = copy_run(two_step_run, tmp_path / "run")
    with pytest.raises(ConfigError, match="model.path: .* -> .*bigger"):  # the run folder names the other model
        Trainer(cfg_for(bigger, run), tensorboard=False)
    (run / "config.toml").unlink()  # a folder without its config: the checkpoint itself must tell
    tr = Trainer(cfg_for(bigger, run), tensorboard=False)
    before = [p.detach().clone() for p in tr.model.parameters()]
    with pytest.raises(CheckpointError, match="another model"):
        tr.resume()
    # the failed load left this model's own weights in place
    assert all(torch.equal(a, b) for a, b in zip(before, tr.model.parameters(), strict=True))


def test_resume_refuses_a_changed_strategy_and_names_the_fields(model_dir, two_step_run, tmp_path, capsys):
    run = copy_run(two_step_run, tmp_path / "run")
    with pytest.raises(SystemExit) as e:
        main(["train", "--resume", str(run), "--strategy", "seq", "--steps", "3"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "strategy.name: 'uniform' -> 'seq'" in err and "--run-dir" in err
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2]  # nothing was touched


def test_resume_of_a_finished_run_says_so(two_step_run, tmp_path, capsys):
    run = copy_run(two_step_run, tmp_path / "run")
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "already reached step 2" in out and f"--resume {run} --steps N" in out


def test_resume_of_a_moved_folder_continues_in_that_folder(two_step_run, tmp_path, monkeypatch):
    moved = copy_run(two_step_run, tmp_path / "elsewhere" / "moved")
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["train", "--resume", "moved", "--steps", "3"]) == 0
    assert [m["step"] for m in read_metrics(moved)] == [0, 1, 2, 3]
    assert checkpoint.latest(moved).name == "step_000003"
    assert [m["step"] for m in read_metrics(two_step_run)] == [0, 1, 2]  # the original run folder is untouched


def test_metrics_survive_a_half_written_line_and_repeated_steps(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"step": 0, "a": 1}, {"step": 1, "a": 2}, {"step": 2, "a": 3}, {"step": 1, "a": 4}, {"step": 2, "a": 5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": 3, "a"')
    assert [m["a"] for m in read_metrics(run)] == [1, 2, 3, 4, 5]  # the half line is skipped, not an error
    tracker = Tracker(run, tensorboard=False)
    tracker.truncate_after(1)
    assert read_metrics(run) == [{"step": 0, "a": 1}, {"step": 1, "a": 4}]
    tracker.truncate_after(-1)
    assert read_metrics(run) == []


def test_an_update_to_non_finite_weights_is_rolled_back(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    object.__setattr__(tr.cfg.optim, "lr", 1e39)  # past the config's own bound: the guard is the last line
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)  # signal in every group
    m = tr.train_step()
    assert m["rolled_back_update"] >= 1 and m["skipped_update"] >= m["rolled_back_update"]
    assert all(bool(torch.isfinite(p).all()) for p in tr.model.parameters())


def test_a_failed_checkpoint_write_names_the_cause_and_keeps_the_last_good_one(
    model_dir, two_step_run, tmp_path, monkeypatch
):
    run = copy_run(two_step_run, tmp_path / "run")
    tr = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)
    assert tr.resume() and tr.step == 2

    def disk_full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "write_state", disk_full)
    tr.train_step()
    with pytest.raises(CheckpointError, match="the disk is full.*earlier checkpoints and metrics are intact"):
        tr.save()
    assert not list((run / "checkpoints").glob(".step_*"))  # no half-written folder left behind
    assert checkpoint.latest(run).name == "step_000002"
    checkpoint.verify(checkpoint.latest(run))


def test_a_new_run_that_fails_before_its_first_step_leaves_no_folder(tmp_path):
    bad_model = tmp_path / "bad_model"
    bad_model.mkdir()
    (bad_model / "config.json").write_text("{not json")
    run = tmp_path / "new_run"
    with pytest.raises(SystemExit) as e:  # the broken folder is a clear error (exit 2), not a traceback
        main(["train", "--model.path", str(bad_model), "--run-dir", str(run), "--steps", "1"])
    assert e.value.code == 2
    assert not run.exists()


@pytest.mark.slow
def test_ctrl_c_stops_at_a_step_boundary_with_a_checkpoint(model_dir, tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reinforce_ada.cli", "train", *cli_flags(model_dir), "--steps", "100000"]
        + ["--save-every", "1000", "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 240
    while time.time() < deadline and len(read_metrics(run)) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    steps = [m["step"] for m in read_metrics(run)]
    assert steps == list(range(len(steps))) and steps[-1] >= 2
    # save_every is 1000, so this checkpoint exists only because Ctrl-C asked for one at the step boundary
    assert checkpoint.latest(run).name == f"step_{steps[-1]:06d}"
    assert f"interrupted at step {steps[-1]}; continue with: reinforce-ada train --resume {run}" in out


@pytest.mark.slow
def test_cli_resume_runs_with_the_run_config_and_new_step_count(model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(["train", *cli_flags(model_dir), "--steps", "1", "--run-dir", str(run)]) == 0
    assert main(["train", "--resume", str(run), "--steps", "2", "--eval-every", "0"]) == 0
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2]
    saved = json.loads((checkpoint.latest(run) / "manifest.json").read_text())
    assert saved["step"] == 2
    assert dataclasses.asdict(checkpoint.run_config(checkpoint.latest(run) / "model"))["run"]["steps"] == 2


def test_a_run_extended_on_resume_keeps_the_warm_up_it_started_with(model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    flags = [*cli_flags(model_dir), "--eval-every", "0", "--optim.lr", "1e-3"]
    assert main(["train", *flags, "--steps", "5", "--run-dir", str(run)]) == 0  # warm-up 1 step (a fifth of 5)
    assert main(["train", "--resume", str(run), "--steps", "30", "--run.progress", "false"]) == 0
    lrs = {m["step"]: m["lr"] for m in read_metrics(run) if "lr" in m}
    assert lrs[1] == pytest.approx(5e-4) and all(lrs[s] == pytest.approx(1e-3) for s in range(2, 31))  # no new warm-up
    err = capsys.readouterr().err
    assert "lr warm-up stays the run's own 1 steps (run.steps now gives 6)" in err
    assert "note: lr warm-up 6 steps" not in err  # the capped warm-up of a fresh run is not announced on resume


def _project(root: Path) -> list[str]:
    """A project folder with a data file, a held-out file, a prior file and a verifier; the flags naming them
    relative to `root`."""
    (root / "my").mkdir(parents=True)
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(12)]
    (root / "my" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "my" / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (root / "my" / "prior.jsonl").write_text('{"prompt": "1+1=", "pass_rate": 0.5}\n')
    (root / "my" / "v.py").write_text(
        "def score(completion, answer):\n    return float(completion.strip() == answer)\n"
    )
    flags = ["--task.name", "file", "--task.path", "my/d.jsonl", "--task.eval_path", "my/e.jsonl"]
    return [*flags, "--prior-file", "my/prior.jsonl", "--task.verifier", "my/v.py:score"]


def test_a_run_started_with_relative_paths_resumes_and_evaluates_from_anywhere(model_dir, tmp_path, monkeypatch):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    flags = _project(start)
    elsewhere.mkdir()
    monkeypatch.chdir(start)
    model = os.path.relpath(model_dir, start)  # the model folder named relative too
    args = [*cli_flags(model_dir), *flags, "--model.path", model, "--steps", "1", "--run-dir", "run"]
    assert main(["train", *args]) == 0
    saved = tomllib.loads((start / "run" / "config.toml").read_text())
    task, prior = saved["task"], saved["strategy"]["prior_file"]
    assert [task["path"], task["eval_path"], prior] == [
        str(start / "my" / f) for f in ("d.jsonl", "e.jsonl", "prior.jsonl")
    ]
    assert task["verifier"] == f"{start / 'my' / 'v.py'}:score"
    assert saved["model"]["path"] == str(Path(model).absolute())  # absolute as given, not resolved
    monkeypatch.chdir(elsewhere)
    assert main(["train", "--resume", str(start / "run"), "--steps", "2"]) == 0
    assert [m["step"] for m in read_metrics(start / "run")] == [0, 1, 2]
    assert main(["eval", "--checkpoint", str(start / "run"), "--samples", "1", "--max-new-tokens", "2"]) == 0


def test_a_moved_project_resumes_with_its_files_new_place(model_dir, tmp_path, monkeypatch, capsys):
    flags = _project(tmp_path / "a")
    monkeypatch.chdir(tmp_path / "a")
    assert main(["train", *cli_flags(model_dir), *flags, "--steps", "1", "--run-dir", "run"]) == 0
    (tmp_path / "a").rename(tmp_path / "b")  # the project moved: config.toml names files under a/ that are gone
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(SystemExit):
        main(["train", "--resume", "run", "--steps", "2"])
    assert "does not exist (moved?): give its new place (--task.path PATH)" in capsys.readouterr().err
    b = tmp_path / "b" / "my"
    moved = ["--task.path", str(b / "d.jsonl"), "--task.eval_path", str(b / "e.jsonl")]
    moved += ["--prior-file", str(b / "prior.jsonl"), "--task.verifier", f"{b / 'v.py'}:score"]
    with pytest.warns(UserWarning, match=r"task.path: the run's .*/a/my/d.jsonl no longer exists; it resumes with"):
        assert main(["train", "--resume", "run", "--steps", "2", *moved]) == 0
    assert [m["step"] for m in read_metrics(tmp_path / "b" / "run")] == [0, 1, 2]
    with pytest.raises(SystemExit):  # a file that exists is another file, not a move: still refused
        main(["train", "--resume", "run", "--steps", "3", "--task.path", str(tmp_path / "b" / "my" / "e.jsonl")])
    assert "task.path: " in capsys.readouterr().err


def test_an_older_run_with_relative_paths_says_where_to_resume_from(model_dir, tmp_path, monkeypatch, capsys):
    flags = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["train", *cli_flags(model_dir), *flags, "--steps", "1", "--run-dir", "run"]) == 0
    config = tmp_path / "run" / "config.toml"

    def as_written_before():  # config.toml holding relative paths, as before paths were stored absolute
        config.write_text(config.read_text().replace(f"{tmp_path}/my/", "my/"))

    as_written_before()
    assert main(["train", "--resume", "run", "--steps", "2"]) == 0  # from where it started: as before
    as_written_before()
    monkeypatch.chdir(tmp_path / "run")
    with pytest.raises(SystemExit):
        main(["train", "--resume", ".", "--steps", "3"])
    err = capsys.readouterr().err
    assert "is relative to the directory the run started in and does not exist from here" in err
    assert "resume from that directory, or give its place (--task.path PATH)" in err


def test_a_malformed_recorded_warm_up_is_a_bad_checkpoint_not_ignored(model_dir, two_step_run, tmp_path, monkeypatch):
    run = copy_run(two_step_run, tmp_path / "run")
    real = checkpoint.load_state

    def newest_says_a_string(ckpt):
        state = real(ckpt)
        return {**state, "warmup_steps": "1"} if ckpt.name == "step_000002" else state

    monkeypatch.setattr(checkpoint, "load_state", newest_says_a_string)
    tr = Trainer(cfg_for(model_dir, run), tensorboard=False)
    assert tr.resume() and tr.step == 1  # the older checkpoint is used
    monkeypatch.setattr(checkpoint, "load_state", lambda ckpt: {**real(ckpt), "warmup_steps": -2})
    with pytest.raises(CheckpointError, match=r"recorded lr warm-up -2 is not a step count"):
        Trainer(cfg_for(model_dir, copy_run(two_step_run, tmp_path / "run2")), tensorboard=False).resume()


def test_prompts_longer_than_the_context_are_left_out_and_counted(model_dir, tmp_path, capsys):
    # the tiny model's context is 128 positions; with 4 new tokens a prompt may have at most 124 tokens
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "9" * 2_000 + "+1=", "answer": "x"}]
    rows += [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(2, 12)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = cfg_for(model_dir, tmp_path / "run")
    cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, name="file", path=str(data), eval_size=2))
    tr = Trainer(cfg, tensorboard=False)
    assert "9" * 1000 not in "".join(p.text for p in tr.train_prompts + tr.eval_prompts)
    assert len(tr.train_prompts) + len(tr.eval_prompts) == 11
    assert "1 of" in capsys.readouterr().out
    tr.fit()
    first = read_metrics(tmp_path / "run")[0]
    assert first["prompts_too_long_train"] + first["prompts_too_long_eval"] == 1


def test_a_task_of_only_too_long_prompts_is_an_error(model_dir, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": "7" * 500 + str(i), "answer": "1"}) + "\n" for i in range(4)))
    cfg = cfg_for(model_dir, tmp_path / "run")
    cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, name="file", path=str(data), eval_size=0))
    with pytest.raises(ConfigError, match="every training prompt is longer than 124 tokens"):
        Trainer(cfg, tensorboard=False)


def test_the_report_shows_rollout_worker_imbalance(tmp_path):
    from reinforce_ada.training.report import make_report, summary_lines

    rows = [{"step": 0, "eval_accuracy": 0.1}]
    rows += [
        {
            "step": i,
            "reward_first_round": 0.2,
            "loss": 0.1,
            "zero_adv_prompt_share": 0.5,
            "samples_generated": 10,
            "samples_trained": 8,
            "worker0_busy_s": 1.0,
            "worker1_busy_s": 0.5,
            "worker_busy_imbalance": 4 / 3,
            "worker_restarts": int(i == 2),
        }
        for i in (1, 2, 3)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert make_report(tmp_path).exists()
    assert "rollout workers: median busy-time imbalance (max/mean) 1.33, 1 restarts" in summary_lines(rows)
