"""Issue 40: `eval` of a model that cannot be sampled safely is one line naming it, not a traceback: weights that hold
NaN, weights that are pickles (never loaded: unpickling can run code), a checkpoint whose `model/` is a link, and a
checkpoint whose files changed since it was saved (its manifest's checksums)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from reinforce_ada.cli import main

FLAGS = ["--samples", "1", "--max-new-tokens", "2", "--no-greedy", "--threads", "1"]


def run_eval(tmp_path: Path, capsys, *which: str) -> str:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    with pytest.raises(SystemExit) as e:
        main(["eval", *which, "--dataset", f"d={data}", *FLAGS])
    assert e.value.code == 2
    return capsys.readouterr().err


def test_nan_weights_are_refused_naming_a_parameter(model_dir, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "nan"
    shutil.copytree(model_dir, folder)
    weights = load_file(str(folder / "model.safetensors"))
    name = next(iter(weights))
    weights[name][:] = float("nan")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    err = run_eval(tmp_path, capsys, "--model", str(folder))
    assert "the model's weights hold NaN or inf" in err and "Traceback" not in err


class Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickled_weights_are_never_loaded(model_dir, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "pickled"
    shutil.copytree(model_dir, folder)
    (folder / "model.safetensors").unlink()
    torch.save({"w": Evil()}, folder / "pytorch_model.bin")
    monkeypatch.chdir(tmp_path)
    err = run_eval(tmp_path, capsys, "--model", str(folder))
    assert "holds its weights as pickles (pytorch_model.bin)" in err and not (tmp_path / "PWNED").exists()


def test_a_checkpoint_whose_model_is_a_link_is_refused(model_dir, tmp_path, capsys):
    ckpt = tmp_path / "run" / "checkpoints" / "step_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "model").symlink_to(model_dir)
    (ckpt / "manifest.json").write_text(json.dumps({"step": 1, "sha256": {}}))
    for path in (ckpt, tmp_path / "run"):  # the checkpoint itself, and a run folder whose latest it is
        err = run_eval(tmp_path, capsys, "--checkpoint", str(path))
        assert "model is a symbolic link" in err and "a checkpoint holds none" in err


def test_a_checkpoint_whose_weights_were_replaced_fails_its_checksum(model_dir, tmp_path, capsys):
    from reinforce_ada.training.checkpoint import sha256

    ckpt = tmp_path / "step_000001"
    shutil.copytree(model_dir, ckpt / "model")
    files = {str(p.relative_to(ckpt)): sha256(p) for p in ckpt.rglob("*") if p.is_file()}
    (ckpt / "manifest.json").write_text(json.dumps({"step": 1, "sha256": files}))
    (ckpt / "model" / "model.safetensors").unlink()
    torch.save({"w": Evil()}, ckpt / "model" / "model.safetensors")  # a pickle under the safetensors name
    err = run_eval(tmp_path, capsys, "--checkpoint", str(ckpt))
    assert "model/model.safetensors does not match its checksum" in err
