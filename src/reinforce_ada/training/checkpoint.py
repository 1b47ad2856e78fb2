"""Atomic, verified checkpoints: everything needed to continue a run bit for bit, and nothing that can run code.

A checkpoint folder holds the trainer state (optimizer, strategy + memory, data order, every RNG, step) as
`state.json` (plain JSON) + `state.safetensors` (its tensors), `model/` (a loadable Hugging Face folder, or the LoRA
adapter) and `manifest.json` (the sha256 of every file). Nothing is unpickled: a crafted run folder cannot run code
on `--resume` (the pre-0.3 `state.pt` is refused, not loaded). It is written to a temporary folder and renamed into
place, and `latest` is replaced atomically afterwards, so a run killed at any moment resumes from the last complete
checkpoint; `verify` re-hashes every file, so a truncated or bit-flipped checkpoint is detected, and the trainer
falls back to the previous good one. Checksums only catch accidents: a folder someone prepared can be rehashed, so
the manifest may name only plain files inside the checkpoint (no `..`, absolute paths or links), and the state's step
must be the one the checkpoint was written at (`check_state`), with every number in it finite. torch is imported
where it is used, so that commands can resolve a model folder (`model_folder_for`) before any heavy import.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import math
import os
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import SafetensorError

from reinforce_ada.errors import ConfigError
from reinforce_ada.training.config import load_toml
from reinforce_ada.training.gate import Folder
from reinforce_ada.training.run_dir import MANIFEST
from reinforce_ada.training.run_dir import complete as complete  # the listing is the run folder's rule (run_dir)
from reinforce_ada.training.run_dir import latest as latest  # kept importable here: checkpoint.latest(run)

if TYPE_CHECKING:
    import torch

STATE_JSON, STATE_TENSORS = "state.json", "state.safetensors"


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used as it is (damaged, written by an unsafe older format, or another run's)."""


def pack(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """A JSON-able copy of `obj`; tensors (and numpy arrays) go to `tensors` under a key the JSON points at."""
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        key = f"t{len(tensors)}"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {"__ndarray__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not any(k.startswith("__") and k.endswith("__") for k in obj):
            return {k: pack(v, tensors) for k, v in obj.items()}
        return {"__items__": [[pack(k, tensors), pack(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [pack(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [pack(v, tensors) for v in obj]
    if isinstance(obj, bytes):
        return {"__bytes__": base64.b64encode(obj).decode()}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"checkpoint state holds a {type(obj).__name__}; only JSON values, tuples and tensors are stored")


def unpack(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [unpack(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]].clone()
    if "__ndarray__" in obj:
        return tensors[obj["__ndarray__"]].numpy().copy()
    if "__items__" in obj:
        return {_hashable(unpack(k, tensors)): unpack(v, tensors) for k, v in obj["__items__"]}
    if "__tuple__" in obj:
        return tuple(unpack(v, tensors) for v in obj["__tuple__"])
    if "__bytes__" in obj:
        return base64.b64decode(obj["__bytes__"])
    return {k: unpack(v, tensors) for k, v in obj.items()}


def _hashable(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digests(folder: Folder) -> dict[str, str]:
    """`relative path -> sha256` of every file in `folder` but the manifest, each read by descriptor (no link
    followed: `Folder.refuse_links` ran first)."""
    out = {}
    for root, _, files, root_fd in os.fwalk(".", dir_fd=folder.fd):
        for name in files:
            rel = os.path.normpath(os.path.join(root, name))
            if rel == MANIFEST:
                continue
            h = hashlib.sha256()
            with os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=root_fd), "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):  # noqa: B023 (fh is the loop's own)
                    h.update(chunk)
            out[rel] = h.hexdigest()
    return dict(sorted(out.items()))


def write_state(folder: Path | Folder, state: dict[str, Any]) -> None:
    """`state.json` + `state.safetensors` into `folder` (through the gate: a path is opened as a `Folder`)."""
    from safetensors.torch import save_file

    folder = folder if isinstance(folder, Folder) else Folder(folder, create=False)
    tensors: dict[str, torch.Tensor] = {}
    doc = pack(state, tensors)
    save_file(tensors, os.path.join(folder.writer_path, STATE_TENSORS))  # safetensors writes by path: the pinned one
    folder.write(STATE_JSON, json.dumps(doc))


def verify(ckpt: Path) -> None:
    """Raise CheckpointError unless every file the manifest lists is there with its recorded sha256."""
    ckpt = Path(ckpt)
    if (ckpt / "state.pt").exists() and not (ckpt / STATE_JSON).exists():
        raise CheckpointError(
            f"{ckpt}: state.pt is the pickle format of reinforce-ada < 0.3; it is not loaded, because unpickling a "
            "file from a run folder can run arbitrary code. Start a new run (or resume with the version that wrote it)"
        )
    manifest = ckpt / MANIFEST
    if not manifest.exists():
        raise CheckpointError(f"{ckpt}: no {MANIFEST} (an incomplete or foreign checkpoint)")
    try:
        listed = json.loads(manifest.read_text())["sha256"]
        if not isinstance(listed, dict):
            raise TypeError(f"sha256 is a {type(listed).__name__}, not an object")
    except (ValueError, KeyError, TypeError, RecursionError, OSError) as e:
        raise CheckpointError(f"{ckpt}: {MANIFEST} is damaged ({type(e).__name__}: {e})") from None
    for rel, digest in listed.items():
        f = inside(ckpt, rel)
        if not f.is_file():
            raise CheckpointError(f"{ckpt}: {rel} is missing")
        if sha256(f) != digest:
            raise CheckpointError(f"{ckpt}: {rel} does not match its checksum (damaged: truncated or bit-flipped)")
    for needed in (STATE_JSON, STATE_TENSORS):
        if needed not in listed:
            raise CheckpointError(f"{ckpt}: the manifest does not list {needed}")


def inside(ckpt: Path, rel: Any) -> Path:
    """`ckpt / rel` for a manifest entry that names a plain file inside the checkpoint folder, else CheckpointError
    (an absolute path, `..`, or a link could make `--resume` hash or read /proc or another run's files)."""
    parts = Path(rel).parts if isinstance(rel, str) else ()
    if not parts or Path(rel).is_absolute() or ".." in parts or "\x00" in rel:
        raise CheckpointError(f"{ckpt}: {MANIFEST} lists {rel!r}, which is not a path inside the checkpoint folder")
    f = p = ckpt / rel
    while p != ckpt:
        if p.is_symlink():
            raise CheckpointError(f"{ckpt}: {p} is a symbolic link; checkpoints hold none")
        p = p.parent
    return f


def save(run_dir: Path | Folder, step: int, state: dict[str, Any], model: Any, tokenizer: Any, keep: int = 2) -> Path:
    """Write the checkpoint of `step` through the run folder's gate (module doc): a fresh hidden folder under
    `checkpoints/` (walked without following links), the writers that are not ours (safetensors, Hugging Face
    `save_pretrained`) given its pinned path (`Folder.writer_path`) and the folder then walked for links, the
    manifest last, renamed into place, `latest` replaced atomically, the oldest beyond `keep` removed."""
    run = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
    try:
        root = run.sub("checkpoints")
    except ConfigError as e:
        raise CheckpointError(f"{e}; checkpoints are written inside the run folder only") from None
    try:
        return _save(root, step, state, model, tokenizer, keep)
    finally:
        root.close()


def _save(root: Folder, step: int, state: dict[str, Any], model: Any, tokenizer: Any, keep: int) -> Path:
    clean_partial(root)
    final = f"step_{step:06d}"
    tmp_name = f".{final}-{secrets.token_hex(4)}"
    try:
        tmp = root.sub(tmp_name)
        try:
            write_state(tmp, state)
            model_dir = tmp.sub("model")
            model.save_pretrained(model_dir.writer_path)
            tokenizer.save_pretrained(model_dir.writer_path)
            model_dir.close()
            tmp.refuse_links()  # a link made in it while they wrote is refused, not hashed or kept
            tmp.write(MANIFEST, json.dumps({"step": step, "sha256": _digests(tmp)}, indent=1))
        finally:
            tmp.close()
        root.remove(final)
        root.rename(tmp_name, final)
    except (OSError, SafetensorError) as e:
        raise CheckpointError(
            _os_message(as_os_error(e), root.path, f"writing the checkpoint of step {step}")
        ) from None
    finally:
        root.remove(tmp_name)
    try:
        root.write("latest", final + "\n")
    except OSError as e:
        raise CheckpointError(_os_message(e, root.path, "updating checkpoints/latest")) from None
    for old in sorted(n for n in root.names() if re.fullmatch(r"step_\d+", n))[:-keep]:
        root.remove(old)  # a folder with all it holds, never following a link in it; a link itself
    return root.path / final


def as_os_error(e: Exception) -> OSError:
    """safetensors reports a failed write as its own error (`... Os { code: 28, ... }`): the OSError it wraps."""
    if isinstance(e, OSError):
        return e
    m = re.search(r"code: (\d+)", str(e))
    code = int(m.group(1)) if m else 0
    return OSError(code, os.strerror(code) if code else str(e))


def _os_message(e: OSError, where: Path, doing: str) -> str:
    why = {
        errno.ENOSPC: "the disk is full",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EDQUOT: "the disk quota is exceeded",
    }.get(e.errno or 0, e.strerror or str(e))
    return (
        f"{doing} in {where} failed: {why}. The folder is unchanged (earlier checkpoints and metrics are intact); "
        "free space or fix permissions, then resume"
    )


def clean_partial(root: Folder) -> None:
    """Remove the temporary folders of checkpoint writes that were killed half-way (`.step_*`)."""
    for name in root.names():
        if name.startswith(".step_"):
            root.remove(name)


def load_state(ckpt: Path) -> dict[str, Any]:
    """The trainer state of a verified checkpoint (JSON + safetensors; never unpickled)."""
    from safetensors.torch import load_file

    verify(ckpt)
    try:
        tensors = load_file(str(Path(ckpt) / STATE_TENSORS))
        state = unpack(json.loads((Path(ckpt) / STATE_JSON).read_text()), tensors)
    except (ValueError, KeyError, TypeError, OSError, SafetensorError) as e:
        raise CheckpointError(f"{ckpt}: the state cannot be read ({type(e).__name__}: {e})") from None
    except RecursionError:
        raise CheckpointError(f"{ckpt}: {STATE_JSON} is nested too deeply to be a trainer state") from None
    check_state(Path(ckpt), state)
    return state


def check_state(ckpt: Path, state: Any) -> None:
    """The state's own step must be the checkpoint's (its folder name and manifest: a rehashed state.json saying
    step 1e9 is refused), and every number in the state finite (a NaN-filled strategy memory or optimizer state
    would load and then steer or wreck the run silently)."""
    if not isinstance(state, dict):
        raise CheckpointError(f"{ckpt}: {STATE_JSON} holds a {type(state).__name__}, not the trainer's state")
    step = state.get("step")
    m = re.fullmatch(r"step_(\d+)", ckpt.name)
    try:
        recorded = json.loads((ckpt / MANIFEST).read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{ckpt}: the state's step is {step!r}, not a whole number >= 0")
    if (m and int(m.group(1)) != step) or recorded != step:
        raise CheckpointError(
            f"{ckpt}: the state says step {step}, but the checkpoint was written at step "
            f"{int(m.group(1)) if m else recorded} (folder name and manifest); it was edited after it was saved"
        )
    bad = _non_finite(state, "state")  # no strategy, optimizer or engine state holds NaN or inf in a sound run
    if bad:
        raise CheckpointError(f"{ckpt}: {bad} holds NaN or inf")


def _non_finite(obj: Any, where: str) -> str:
    """The path of the first non-finite number in `obj` (tensors, floats, nested dicts/lists), else ""."""
    import torch

    stack = [(obj, where)]
    while stack:
        x, at = stack.pop()
        if isinstance(x, torch.Tensor) and x.is_floating_point() and not bool(torch.isfinite(x).all()):
            return at
        if isinstance(x, float) and not math.isfinite(x):
            return at
        if isinstance(x, dict):
            stack.extend((v, f"{at}.{k}") for k, v in x.items())
        elif isinstance(x, list | tuple):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(x))
    return ""


def model_folder(path: Path) -> Path:
    """A checkpoint's model folder, from a checkpoint folder, its `model/` or a run folder (latest checkpoint)."""
    path = Path(path)
    if (path / "config.json").exists() or (path / "adapter_config.json").exists():
        return path
    ckpt = path if (path / "model").exists() or (path / "model").is_symlink() else latest(path)
    if ckpt is None:
        raise FileNotFoundError(f"{path} holds no checkpoint (expected model/, state.pt or checkpoints/)")
    if (ckpt / "model").is_symlink():  # checkpoints hold no links: this one was edited (or prepared) by someone
        raise CheckpointError(
            f"{ckpt / 'model'} is a symbolic link (to {os.readlink(ckpt / 'model')}); a checkpoint holds none. "
            "Evaluate the folder it points to with --model"
        )
    return ckpt / "model"


def load_model_weights(model: Any, folder: Path) -> None:
    """Load a checkpoint's weights (full model, or LoRA adapter) into `model` in place."""
    from safetensors.torch import load_file

    def read(name: str) -> dict[str, torch.Tensor]:
        try:
            return load_file(str(folder / name))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{folder / name} cannot be read (truncated or not safetensors: {e})") from None

    if (folder / "adapter_model.safetensors").exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, read("adapter_model.safetensors"))
        return
    if not (folder / "model.safetensors").exists():
        raise FileNotFoundError(f"{folder} holds no model.safetensors or adapter_model.safetensors")
    weights = read("model.safetensors")
    try:
        result = model.load_state_dict(weights, strict=False)
    except RuntimeError as e:  # shapes differ: another model size
        first = str(e).strip().splitlines()[-1].strip() if str(e).strip() else str(e)
        raise CheckpointError(f"checkpoint {folder} holds another model than this run's ({first})") from None
    # tied output embeddings are not saved separately; anything else missing means a different model
    missing = [k for k in result.missing_keys if "lm_head" not in k]
    if missing or result.unexpected_keys:
        raise CheckpointError(
            f"checkpoint {folder} does not match the model (full model vs LoRA adapter, or another architecture): "
            f"{(missing + result.unexpected_keys)[:3]}"
        )


def model_folder_for(checkpoint: str | None, model: str | None) -> Path:
    """The folder to load: a checkpoint (its folder, model/ or a run folder's latest) or any HF / adapter folder."""
    if checkpoint:
        try:
            folder = model_folder(Path(checkpoint))
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        if folder.name == "model" and (folder.parent / MANIFEST).exists():
            verify(folder.parent)  # a weights file replaced (by a pickle, say) or damaged since the run saved it
        return folder
    folder = Path(str(model))
    if not ((folder / "config.json").exists() or (folder / "adapter_config.json").exists()):
        raise ConfigError(f"--model {folder}: not a Hugging Face model folder (no config.json)")
    return folder


def run_config(folder: Path) -> Any:
    """The TrainConfig of the run a checkpoint folder belongs to (the config.toml above it), else None."""
    found = next((p / "config.toml" for p in folder.resolve().parents if (p / "config.toml").exists()), None)
    return load_toml(found) if found else None
