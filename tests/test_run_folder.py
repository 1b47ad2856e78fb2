"""The run folder's promises, kept by the library itself (`training.run_dir`), not only by the CLI: another run's
config is refused, a folder holding steps trains only after resume(), nothing is written or deleted through a
symlink, one trainer at a time (a lock naming the holder), a checkpoint that lies about itself is not trusted, and
every broken file or failed write is a clear error instead of a traceback."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors import SafetensorError

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.training import checkpoint, run_dir
from reinforce_ada.training.checkpoint import CheckpointError
from reinforce_ada.training.config import load_toml, to_toml
from reinforce_ada.training.tracking import read_metrics
from reinforce_ada.training.trainer import Trainer
from tests.test_run_lifecycle import cfg_for, copy_run


@pytest.fixture(scope="module")
def two_step_run(model_dir, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "two"
    Trainer(cfg_for(model_dir, run), tensorboard=False).fit()
    return run


def rehash(ckpt: Path) -> None:
    """Rewrite the manifest's checksums after an edit: what an attacker who prepares a run folder can do."""
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["sha256"] = {
        rel: checkpoint.sha256(ckpt / rel) for rel in manifest["sha256"] if (ckpt / rel).is_file()
    } | {rel: d for rel, d in manifest["sha256"].items() if not (ckpt / rel).is_file()}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


# -- never mix two runs, from Python as from the CLI ------------------------------------------------------------
def test_trainer_refuses_a_folder_holding_another_runs_config(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    saved = (run / "config.toml").read_bytes()
    base = cfg_for(model_dir, run)
    other = dataclasses.replace(base, strategy=base.strategy.replace(n=2))
    with pytest.raises(ConfigError, match=r"strategy.n: 4 -> 2.*--run-dir"):
        Trainer(other, tensorboard=False)
    assert (run / "config.toml").read_bytes() == saved  # the other run's config was not overwritten


def test_same_config_trains_only_after_resume_as_the_cli(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    tr = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)
    with pytest.raises(ConfigError, match="already holds a run; resume it"):
        tr.fit()  # from step 0 on top of steps 0..2: refused, as `train --run-dir` on it is
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2]
    again = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)  # the refused fit() released the lock
    assert again.resume() and again.step == 2
    again.fit()
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2, 3]


def test_cli_fresh_run_into_a_used_folder_is_refused(model_dir, two_step_run, tmp_path, capsys):
    run = copy_run(two_step_run, tmp_path / "run")
    with pytest.raises(SystemExit) as e:
        main(["train", "--model.path", str(model_dir), "--run-dir", str(run)])
    assert e.value.code == 2 and f"--resume {run}" in capsys.readouterr().err


def test_a_folder_holding_only_another_runs_config_is_not_reused(model_dir, tmp_path, capsys):
    cfg = cfg_for(model_dir, tmp_path / "default")
    (tmp_path / "default").mkdir()
    other = dataclasses.replace(cfg, strategy=cfg.strategy.replace(n=2))
    (tmp_path / "default" / "config.toml").write_text(to_toml(other))  # a run killed before its first step
    moved = run_dir.fresh_run_dir(cfg, explicit=False, resume=False)
    assert moved.run.run_dir == str(tmp_path / "default-1")
    with pytest.raises(ConfigError, match=r"strategy.n: 2 -> 4"):
        run_dir.fresh_run_dir(cfg, explicit=True, resume=False)
    assert run_dir.fresh_run_dir(other, explicit=True, resume=False) == other  # its own config: start over there


# -- nothing written or deleted outside the folder --------------------------------------------------------------
@pytest.mark.parametrize("name", ["report.png", "config.toml", "metrics.jsonl", "tensorboard", "checkpoints"])
def test_a_symlink_in_the_run_folder_is_refused_and_its_target_untouched(model_dir, two_step_run, tmp_path, name):
    run = copy_run(two_step_run, tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / name
    if name in ("tensorboard", "checkpoints"):
        (target / "step_000001").mkdir(parents=True)
        (target / "step_000001" / "keep.txt").write_text("mine")
    else:
        target.write_text("")
    victim = run / name
    if victim.is_dir():
        import shutil

        shutil.rmtree(victim)
    else:
        victim.unlink(missing_ok=True)
    victim.symlink_to(target)
    before = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in [target, *target.rglob("*")])
    with pytest.raises(ConfigError, match=rf"{name} is a symbolic link.*must not hold links"):
        Trainer(cfg_for(model_dir, run, steps=3), tensorboard=True)
    with pytest.raises(SystemExit):
        main(["train", "--resume", str(run), "--steps", "3"])
    assert sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in [target, *target.rglob("*")]) == before


def test_files_are_never_written_through_a_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    link = tmp_path / "metrics.jsonl"
    link.symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        run_dir.append_line(link, "{}\n")
    (tmp_path / "config.toml").symlink_to(outside)
    run_dir.write_file(tmp_path / "config.toml", "x = 1\n")  # replaces the link itself
    assert outside.read_text() == "mine" and not (tmp_path / "config.toml").is_symlink()
    (tmp_path / "checkpoints").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(CheckpointError, match="checkpoints is a symbolic link"):
        checkpoint.save(tmp_path, 1, {}, model=None, tokenizer=None)


# -- one trainer per folder --------------------------------------------------------------------------------------
def test_a_second_trainer_on_the_folder_is_refused_naming_the_holder(model_dir, tmp_path):
    first = Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    with pytest.raises(
        ConfigError, match=rf"run folder {tmp_path / 'run'} is in use by another trainer \(pid {os.getpid()}\)"
    ):
        Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    first.close()
    Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False).close()


def test_the_lock_holds_across_processes(tmp_path):
    (tmp_path / "run").mkdir()
    code = "import sys, time; from reinforce_ada.training.run_dir import RunLock; l = RunLock(sys.argv[1]); "
    code += "print('locked', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=rf"in use by another trainer \(pid {proc.pid}\)"):
            run_dir.RunLock(tmp_path / "run")
    finally:
        proc.kill()
        proc.wait()
    run_dir.RunLock(tmp_path / "run").release()  # the holder died: the lock is free again


def test_a_read_only_run_folder_is_an_error_up_front(model_dir, tmp_path, monkeypatch):
    real_open = os.open

    def read_only(path, *a, **k):
        if str(path).endswith(run_dir.LOCK):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(ConfigError, match="cannot be written \\(the file system is read-only\\)"):
        Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=True)


# -- a checkpoint that lies about itself ------------------------------------------------------------------------
def test_a_rehashed_state_with_a_false_step_is_not_trusted(model_dir, two_step_run, tmp_path, capsys):
    run = copy_run(two_step_run, tmp_path / "run")
    newest = run / "checkpoints" / "step_000002"
    state = json.loads((newest / "state.json").read_text())
    state["step"] = 1_000_000_000
    (newest / "state.json").write_text(json.dumps(state))
    rehash(newest)
    tr = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)
    assert tr.resume() and tr.step == 1  # the edited checkpoint is skipped, the one before is used
    assert "says step 1000000000, but the checkpoint was written at step 2" in capsys.readouterr().out


def test_non_finite_numbers_anywhere_in_the_state_are_refused(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    ckpt = run / "checkpoints" / "step_000002"
    state = checkpoint.load_state(ckpt)
    state["optimizer"]["param_groups"][0]["lr"] = float("nan")
    checkpoint.write_state(ckpt, state)
    rehash(ckpt)
    with pytest.raises(CheckpointError, match=r"state\.optimizer\.param_groups\[0\]\.lr holds NaN or inf"):
        checkpoint.load_state(ckpt)
    state["optimizer"]["param_groups"][0]["lr"] = 2e-4
    state["order"] = {**state["order"], "planted": [1.0, float("inf")]}
    checkpoint.write_state(ckpt, state)
    rehash(ckpt)
    with pytest.raises(CheckpointError, match=r"state\.order\.planted\[1\] holds NaN or inf"):
        checkpoint.load_state(ckpt)


@pytest.mark.parametrize(
    "rel, needle",
    [
        ("../../../../../../proc/self/status", "not a path inside the checkpoint folder"),
        ("/proc/self/status", "not a path inside the checkpoint folder"),
        ("model/linked", "is a symbolic link"),
    ],
)
def test_a_manifest_cannot_point_outside_the_checkpoint(two_step_run, tmp_path, rel, needle):
    run = copy_run(two_step_run, tmp_path / "run")
    ckpt = run / "checkpoints" / "step_000002"
    (ckpt / "model" / "linked").symlink_to("/proc/self/status")
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["sha256"][rel] = "0" * 64
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=needle):
        checkpoint.verify(ckpt)


def test_a_state_nested_too_deeply_and_a_truncated_header_are_named(model_dir, two_step_run, tmp_path):
    run = copy_run(two_step_run, tmp_path / "run")
    newest, older = run / "checkpoints" / "step_000002", run / "checkpoints" / "step_000001"
    (newest / "state.json").write_text("[" * 100_000 + "]" * 100_000)
    rehash(newest)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        checkpoint.load_state(newest)
    (older / "state.safetensors").write_bytes((older / "state.safetensors").read_bytes()[:6])
    rehash(older)
    with pytest.raises(CheckpointError, match="the state cannot be read"):
        checkpoint.load_state(older)
    model_file = newest / "model" / "model.safetensors"
    model_file.write_bytes(model_file.read_bytes()[:5])
    tr = Trainer(cfg_for(model_dir, copy_run(two_step_run, tmp_path / "run2")), tensorboard=False)
    with pytest.raises(CheckpointError, match="cannot be read \\(truncated or not safetensors"):
        checkpoint.load_model_weights(tr.model, newest / "model")
    tr.close()


def test_disk_full_inside_safetensors_is_our_message_and_keeps_the_last_checkpoint(
    model_dir, two_step_run, tmp_path, monkeypatch
):
    import safetensors.torch

    run = copy_run(two_step_run, tmp_path / "run")
    tr = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)
    assert tr.resume()

    def disk_full(*a, **k):
        raise SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        )

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    with pytest.raises(
        CheckpointError, match=rf"checkpoint of step 2 in {run / 'checkpoints'} failed: the disk is full"
    ):
        tr.save()
    assert checkpoint.latest(run).name == "step_000002" and not list((run / "checkpoints").glob(".step_*"))
    checkpoint.verify(checkpoint.latest(run))
    tr.close()


# -- config files the user got wrong ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "write, needle",
    [
        (lambda p: p.write_bytes("[run]\nsteps = 3\n".encode("utf-16")), "TOML files are UTF-8, this one is UTF-16"),
        (lambda p: p.write_bytes('[run]\nrun_dir = "caf\xe9"\n'.encode("latin-1")), "is not UTF-8 \\(byte"),
        (lambda p: p.mkdir(), "is not a file"),
    ],
    ids=["utf16", "latin1", "directory"],
)
def test_a_config_file_in_another_encoding_or_a_folder_is_named(tmp_path, capsys, write, needle):
    path = tmp_path / "preset.toml"
    write(path)
    with pytest.raises(ConfigError, match=needle):
        load_toml(path)
    with pytest.raises(SystemExit) as e:
        main(["train", "--config", str(path), "--steps", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err


@pytest.mark.slow
def test_run_folder_names_with_control_characters_round_trip(model_dir, tmp_path):
    cfg = cfg_for(model_dir, tmp_path / "run\nwith\x1b[31mcontrols\t\x7f")
    path = tmp_path / "c.toml"
    path.write_text(to_toml(cfg))
    assert load_toml(path) == cfg
    Trainer(cfg, tensorboard=False).fit()
    assert load_toml(Path(cfg.run.run_dir) / "config.toml").run.run_dir == cfg.run.run_dir
    assert main(["train", "--resume", cfg.run.run_dir, "--steps", "3"]) == 0
    assert [m["step"] for m in read_metrics(Path(cfg.run.run_dir))] == [0, 1, 2, 3]
