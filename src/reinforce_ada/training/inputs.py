"""A digest for every input a run depends on, recorded in the run folder when it starts (`inputs.json`) and compared
on resume: the run trusts its files by content, not by path.

1) The inputs are the local paths the config names (`paths.local_paths`): the data file (`task.path`, which also
   holds the prompts' `features`), the held-out file (`task.eval_path`), the prior file (`strategy.prior_file`), a
   verifier's `file.py` (`task.verifier`) and a local model folder (`model.path`). A file's digest is its sha256 and
   size; a folder's (a model, a saved `datasets` folder) is the sha256 of its files' names, sizes and sha256s. Each
   is read once per start or resume (about a second per GB; the model's pages are then in the cache it loads from).
2) `record` writes them when a run starts in the folder (and, once, when an older folder without them is resumed:
   from then on they are checked).
3) `check` runs before anything is read on resume (`run_dir.check_saved_config`): each recorded input must have its
   recorded digest, at its recorded place or at the new place given for it (`paths.moved_paths`: a moved project).
   Any other file (another dataset with the same ids, another verifier, a prior file edited since) is refused naming
   the field, the file and what to do. A folder whose `inputs.json` is missing (made by an earlier version) resumes
   as before, trusting paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.training.gate import Folder
from reinforce_ada.training.paths import absolute_paths, file_part, local_paths

FILE = "inputs.json"
"""The run folder's record of its inputs: `{"task.path": {"path": ..., "sha256": ..., "size": ...}, ...}`."""


def _file_sha256(path: Path) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO swapped in after the stat cannot block
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ConfigError(f"{path} is not a regular file (a FIFO, socket or device)")
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def digest(path: str | Path) -> dict[str, Any] | None:
    """`{"sha256", "size"}` of a file, or of a folder's files (names, sizes, sha256s; links to files followed, as a
    Hugging Face cache's snapshot holds them); None for anything else (missing, a FIFO: its reader names it)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        sha, size = _file_sha256(p)
        return {"sha256": sha, "size": size}
    if not stat.S_ISDIR(st.st_mode):
        return None
    h, total = hashlib.sha256(), 0
    for root, dirs, files in os.walk(p):
        dirs.sort()
        for name in sorted(files):
            f = Path(root) / name
            if not f.is_file():
                continue
            sha, size = _file_sha256(f)
            h.update(f"{f.relative_to(p).as_posix()}\0{size}\0{sha}\n".encode())
            total += size
    return {"sha256": h.hexdigest(), "size": total}


def inputs_of(cfg: Any) -> dict[str, dict[str, Any]]:
    """`section.field` -> `{"path", "sha256", "size"}` for each local input of `cfg` that exists (a model id that is
    no local folder has none)."""
    out = {}
    for section, name, value in local_paths(absolute_paths(cfg)):
        d = digest(file_part(value))
        if d is not None:
            out[f"{section}.{name}"] = {"path": value, **d}
    return out


def read(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    """The recorded inputs, or None when the folder has no record (a run started by an earlier version). A record
    that is not one (hand-edited, damaged) is an error: it would otherwise turn the check off."""
    path = Path(run_dir) / FILE
    if not os.path.lexists(path):
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise ConfigError(
            f"{path} cannot be read ({type(e).__name__}: {e}); restore it from a copy of the run"
        ) from None
    ok = isinstance(data, dict) and all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("size"), int)
        for v in data.values()
    )
    if not ok:
        raise ConfigError(f"{path} is not a record of the run's inputs (field -> sha256 and size); restore it")
    return data


def record(folder: Folder, cfg: Any) -> None:
    folder.write(FILE, json.dumps(inputs_of(cfg), indent=1) + "\n")


def check(run_dir: Path, cfg: Any) -> bool:
    """Refuse (ConfigError) any recorded input whose file, as `cfg` names it now, is not the recorded one (module doc,
    3); returns whether the folder records digests (False: a folder from before them, trusted by path)."""
    recorded = read(run_dir)
    if recorded is None:
        return False
    given = {f"{s}.{n}": v for s, n, v in local_paths(absolute_paths(cfg))}
    for field, was in recorded.items():
        value = given.get(field)
        if value is None:  # a field no longer set: the config check names it
            continue
        now = digest(file_part(value))
        if now is not None and (now["sha256"], now["size"]) == (was["sha256"], was["size"]):
            continue
        flag = "--prior-file" if field == "strategy.prior_file" else f"--{field}"
        place = str(was.get("path", value))
        what = "changed since the run started" if file_part(value) == file_part(place) else (
            f"is not the file the run recorded for it ({place})"
        )  # fmt: skip
        seen = "missing" if now is None else f"sha256 {now['sha256'][:12]}..., {now['size']} bytes"
        raise ConfigError(
            f"run folder {run_dir}: {field}={value!r} {what}: the run recorded sha256 {was['sha256'][:12]}..., "
            f"{was['size']} bytes; it is now {seen}. Resuming on other inputs would mix two runs: give the file "
            f"the run trained on ({flag} PATH), or start a new run in another folder"
        )
    return True
