"""The local files and folders a run's config names, stored absolute so a run folder resumes and evaluates from any
working directory.

1) `absolute_paths`: every `LOCAL_PATHS` value that is a relative path to something that exists from here becomes
   absolute (`Path.absolute`: a `..` after a symlink is kept, not folded away as text); so does the file part of a
   `task.verifier` of the form `path/to/file.py:function`. The Trainer applies it, so config.toml holds them absolute.
2) `same_path`: equal as text, as absolute paths, or as one existing file (`os.path.samefile`: a symlinked working
   directory names the same file two ways).
3) `moved_paths`: on resume, a local path the run recorded that no longer exists (the project was moved or copied
   elsewhere) may be given its new place; `run_dir.check_saved_config` allows it with a warning, and refuses any other
   change of the field.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

LOCAL_PATHS = (("model", "path"), ("task", "path"), ("task", "eval_path"), ("strategy", "prior_file"))
"""Fields that name a local file or folder (a model id that is no local folder stays as given)."""
VERIFIER = ("task", "verifier")
"""`path/to/file.py:function` names a file too (module:function and the built-in names do not)."""


def absolute_paths(cfg: Any) -> Any:
    """`cfg` with each local path made absolute where it exists from here (module doc, 1); anything else as it is: None,
    a model id, a missing file (its own error comes when it is read)."""
    for section, name, value in local_paths(cfg):
        new = _absolute(value)
        if new != value:
            sec = getattr(cfg, section)
            cfg = replace(
                cfg, **{section: sec.replace(**{name: new}) if section == "strategy" else replace(sec, **{name: new})}
            )
    return cfg


def local_paths(cfg: Any) -> list[tuple[str, str, str]]:
    """(section, field, value) of every local path the config sets, the verifier's file included (its whole value:
    `file.py:function`)."""
    out = []
    for section, name in (*LOCAL_PATHS, VERIFIER):
        sec = getattr(cfg, section)
        value = getattr(sec.options if section == "strategy" else sec, name, None)
        if isinstance(value, str) and value and ((section, name) != VERIFIER or _verifier_file(value)):
            out.append((section, name, value))
    return out


def same_path(a: Any, b: Any) -> bool:
    """Whether two values of a local-path field name the same thing (module doc, 2)."""
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    fa, fb = file_part(a), file_part(b)
    if a[len(fa) :] != b[len(fb) :]:  # a verifier's ":function" must match
        return False
    if str(Path(fa).absolute()) == str(Path(fb).absolute()):
        return True
    try:
        return os.path.samefile(fa, fb)
    except OSError:  # one of them does not exist
        return False


def moved_paths(saved: Any, new: Any) -> list[tuple[str, str, str]]:
    """(`section.field`, recorded, given) for each local path whose recorded file no longer exists and whose given one
    does (module doc, 3)."""
    given = {(s, n): v for s, n, v in local_paths(new)}
    out = []
    for section, name, old in local_paths(saved):
        value = given.get((section, name))
        if value is not None and not same_path(old, value):
            if not Path(file_part(old)).exists() and Path(file_part(value)).exists():
                out.append((f"{section}.{name}", old, value))
    return out


def _absolute(value: str) -> str:
    path = file_part(value)
    if Path(path).is_absolute() or not Path(path).exists():
        return value
    return str(Path(path).absolute()) + value[len(path) :]


def file_part(value: str) -> str:
    """The path in a field's value: all of it, or the `file.py` of `file.py:function`."""
    return _verifier_file(value) or value


def _verifier_file(value: str) -> str | None:
    where, colon, _ = value.rpartition(":")
    return where if colon and where.endswith(".py") else None
