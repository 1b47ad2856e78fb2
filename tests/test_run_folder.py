"""The run folder's promises, kept by the library itself (`training.run_dir`), not only by the CLI: another run's
config is refused, a folder holding steps trains only after resume(), nothing is written or deleted through a
symlink, one trainer at a time (a lock naming the holder), a checkpoint that lies about itself is not trusted, and
every broken file or failed write is a clear error instead of a traceback."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
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
from tests.test_run_lifecycle import _project, cfg_for, cli_flags, copy_run


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


# -- input digests ----------------------------------------------------------------------------------------------------
# A digest for every input a run depends on (`training.inputs`): recorded in `inputs.json` when the run starts,
# compared on resume. A file changed since (a prior file edited between save and resume, a data file rewritten), or a
# "new place" of a moved file that is another file (another dataset with the same ids, another verifier), is refused
# naming the field, the file and what to do; the same file moved resumes; a folder from before digests resumes as
# before and is recorded from then on.
INPUTS = "inputs.json"


@pytest.fixture(scope="module")
def base(model_dir, tmp_path_factory) -> Path:
    """A project (data, held-out, prior and verifier files) with a 1-step run of it in `run/`, made once."""
    root = tmp_path_factory.mktemp("digests") / "a"
    flags = _project(root)
    my = root / "my"
    flags = [f.replace("my/", f"{my}/") if f.startswith("my/") else f for f in flags]
    assert main(["train", *cli_flags(model_dir), *flags, "--steps", "1", "--run-dir", str(root / "run")]) == 0
    return root


def clone(base: Path, dst: Path) -> Path:
    """The project and its run as if made at `dst` (the recorded paths rewritten): each test edits its own files."""
    shutil.copytree(base, dst)
    for name in ("config.toml", INPUTS):
        f = dst / "run" / name
        f.write_text(f.read_text().replace(str(base), str(dst)))
    return dst


def resume(run: Path, *flags: str) -> int:
    return main(["train", "--resume", str(run), "--steps", "2", *flags])


def refused(capsys, run: Path, *flags: str) -> str:
    with pytest.raises(SystemExit) as e:
        resume(run, *flags)
    assert e.value.code == 2
    assert [m["step"] for m in read_metrics(run)] == [0, 1]  # nothing was trained
    return capsys.readouterr().err


def test_a_run_records_each_inputs_sha256_and_size(base):
    from reinforce_ada.training.inputs import digest

    recorded = json.loads((base / "run" / INPUTS).read_text())
    assert set(recorded) == {"model.path", "task.path", "task.eval_path", "strategy.prior_file", "task.verifier"}
    assert recorded["task.path"]["path"] == str(base / "my" / "d.jsonl")
    assert recorded["task.path"]["size"] == (base / "my" / "d.jsonl").stat().st_size
    assert recorded["task.verifier"]["sha256"] == digest(base / "my" / "v.py")["sha256"]


def test_a_prior_file_edited_between_save_and_resume_is_refused(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    (p / "my" / "prior.jsonl").write_text('{"prompt": "1+1=", "pass_rate": 0.9}\n')  # was 0.5: read silently
    err = refused(capsys, p / "run")
    assert f"strategy.prior_file='{p}/my/prior.jsonl' changed since the run started" in err
    assert "give the file the run trained on (--prior-file PATH), or start a new run in another folder" in err


def test_a_data_file_rewritten_in_place_is_refused(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    data = p / "my" / "d.jsonl"
    rows = [json.loads(ln) for ln in data.read_text().splitlines()]
    data.write_text("".join(json.dumps({**r, "features": [1.0, 2.0]}) + "\n" for r in rows))  # features added
    err = refused(capsys, p / "run")
    assert f"task.path='{data}' changed since the run started" in err and "(--task.path PATH)" in err


@pytest.mark.parametrize(
    "field, flag, other",
    [
        ("task.path", "--task.path", lambda my: my / "e.jsonl"),  # another dataset, its ids a subset of the run's
        ("task.verifier", "--task.verifier", lambda my: f"{my / 'yes.py'}:score"),  # another verifier: always 1.0
    ],
    ids=["dataset", "verifier"],
)
def test_a_moved_files_new_place_must_have_its_recorded_digest(base, tmp_path, capsys, field, flag, other):
    p = clone(base, tmp_path / "p")
    moved = p.rename(tmp_path / "q")  # the project moved: config.toml names files under p/ that are gone
    my = moved / "my"
    (my / "yes.py").write_text("def score(completion, answer):\n    return 1.0\n")
    new = {"--task.path": str(my / "d.jsonl"), "--task.eval_path": str(my / "e.jsonl")}
    new |= {"--prior-file": str(my / "prior.jsonl"), "--task.verifier": f"{my / 'v.py'}:score"}
    new[flag] = str(other(my))
    err = refused(capsys, moved / "run", *[x for kv in new.items() for x in kv])
    assert f"{field}='{other(my)}' is not the file the run recorded for it ({p}/my/" in err
    new[flag] = {"--task.path": str(my / "d.jsonl"), "--task.verifier": f"{my / 'v.py'}:score"}[flag]
    with pytest.warns(
        UserWarning, match=r"no longer exists; it resumes with .* \(it has the sha256 the run recorded\)"
    ):
        assert resume(moved / "run", *[x for kv in new.items() for x in kv]) == 0  # the same files: it resumes
    assert [m["step"] for m in read_metrics(moved / "run")] == [0, 1, 2]


def test_a_run_folder_from_before_digests_resumes_and_is_recorded_from_then_on(base, tmp_path):
    from reinforce_ada.training.inputs import digest

    p = clone(base, tmp_path / "p")
    (p / "run" / INPUTS).unlink()  # written by 0.4.0: no inputs.json
    (p / "my" / "prior.jsonl").write_text('{"prompt": "1+1=", "pass_rate": 0.7}\n')
    assert resume(p / "run") == 0  # trusted by path, as before
    recorded = json.loads((p / "run" / INPUTS).read_text())
    assert recorded["strategy.prior_file"]["sha256"] == digest(p / "my" / "prior.jsonl")["sha256"]


def test_a_damaged_record_is_refused_not_ignored(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    (p / "run" / INPUTS).write_text('{"task.path": {"sha256": 1}}')
    assert "inputs.json is not a record of the run's inputs" in refused(capsys, p / "run")


def test_a_folder_is_digested_by_its_files(tmp_path):
    from reinforce_ada.training.inputs import digest

    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "sub" / "w.bin").write_bytes(b"\0" * 10)
    first = digest(tmp_path / "m")
    assert first["size"] == 12
    (tmp_path / "m" / "sub" / "w.bin").write_bytes(b"\1" * 10)
    assert digest(tmp_path / "m")["sha256"] != first["sha256"]
    assert digest(tmp_path / "missing") is None
