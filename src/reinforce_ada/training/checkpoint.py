"""Atomic checkpoints: everything needed to continue a run bit for bit.

A checkpoint folder holds `state.pt` (optimizer, scheduler, strategy + tracker, data order, every RNG, step) and
`model/` (a loadable Hugging Face folder, or the LoRA adapter). It is written to a temporary folder and renamed into
place, and `latest` is replaced atomically afterwards, so a run killed at any moment resumes from the last complete
checkpoint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.training.config import load_toml


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def save(run_dir: Path, step: int, state: dict[str, Any], model: Any, tokenizer: Any, keep: int = 2) -> Path:
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        torch.save(state, tmp / "state.pt")
        model.save_pretrained(tmp / "model")
        tokenizer.save_pretrained(tmp / "model")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_atomic(root / "latest", final.name + "\n")
    for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(run_dir: Path) -> Path | None:
    root = checkpoint_dir(run_dir)
    marker = root / "latest"
    if marker.exists():
        p = root / marker.read_text().strip()
        if (p / "state.pt").exists():
            return p
    done = sorted(p for p in root.glob("step_*") if (p / "state.pt").exists())
    return done[-1] if done else None


def load_state(ckpt: Path) -> dict[str, Any]:
    # our own file: it holds numpy generator states and plain Python objects besides tensors
    return torch.load(ckpt / "state.pt", weights_only=False)


def model_folder(path: Path) -> Path:
    """A checkpoint's model folder, from a checkpoint folder, its `model/` or a run folder (latest checkpoint)."""
    path = Path(path)
    if (path / "config.json").exists() or (path / "adapter_config.json").exists():
        return path
    if (path / "model").is_dir():
        return path / "model"
    ckpt = latest(path)
    if ckpt is None:
        raise FileNotFoundError(f"{path} holds no checkpoint (expected model/, state.pt or checkpoints/)")
    return ckpt / "model"


def load_model_weights(model: Any, folder: Path) -> None:
    """Load a checkpoint's weights (full model, or LoRA adapter) into `model` in place."""
    from safetensors.torch import load_file

    if (folder / "adapter_model.safetensors").exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        return
    if not (folder / "model.safetensors").exists():
        raise FileNotFoundError(f"{folder} holds no model.safetensors or adapter_model.safetensors")
    result = model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    # tied output embeddings are not saved separately; anything else missing means a different model
    missing = [k for k in result.missing_keys if "lm_head" not in k]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"checkpoint {folder} does not match the model: {(missing + result.unexpected_keys)[:3]}")


def model_folder_for(checkpoint: str | None, model: str | None) -> Path:
    """The folder to load: a checkpoint (its folder, model/ or a run folder's latest) or any HF / adapter folder."""
    if checkpoint:
        try:
            return model_folder(Path(checkpoint))
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
    folder = Path(str(model))
    if not ((folder / "config.json").exists() or (folder / "adapter_config.json").exists()):
        raise ConfigError(f"--model {folder}: not a Hugging Face model folder (no config.json)")
    return folder


def run_config(folder: Path) -> Any:
    """The TrainConfig of the run a checkpoint folder belongs to (the config.toml above it), else None."""
    found = next((p / "config.toml" for p in folder.resolve().parents if (p / "config.toml").exists()), None)
    return load_toml(found) if found else None
