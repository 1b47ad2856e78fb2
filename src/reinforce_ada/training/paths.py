"""The local files and folders a run's config names, stored absolute so a run folder resumes and evaluates from any
working directory (`Trainer` applies `absolute_paths`; `run_dir.changed_run_fields` compares paths absolute)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

LOCAL_PATHS = (("model", "path"), ("task", "path"), ("task", "eval_path"), ("strategy", "prior_file"))
"""Fields that name a local file or folder. A run stores them absolute (`absolute_paths`), so its folder resumes and
evaluates from any working directory."""


def absolute_paths(cfg: Any) -> Any:
    """`cfg` with every `LOCAL_PATHS` value that is a relative path to something that exists made absolute
    (`os.path.abspath`: symlinks are kept). Anything else is left as it is: None, a model id that is not a local
    folder, or a missing file, whose own error comes when it is read."""

    def fixed(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).is_absolute() and Path(value).exists():
            return os.path.abspath(value)
        return value

    for section, name, value in local_paths(cfg):
        if fixed(value) != value:
            sec = getattr(cfg, section)
            new = sec.replace(**{name: fixed(value)}) if section == "strategy" else replace(sec, **{name: fixed(value)})
            cfg = replace(cfg, **{section: new})
    return cfg


def local_paths(cfg: Any) -> list[tuple[str, str, str]]:
    """(section, field, value) of every `LOCAL_PATHS` field that is set (a strategy's options live one level down)."""
    out = []
    for section, name in LOCAL_PATHS:
        sec = getattr(cfg, section)
        value = getattr(sec.options if section == "strategy" else sec, name, None)
        if isinstance(value, str) and value:
            out.append((section, name, value))
    return out
