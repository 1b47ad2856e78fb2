"""Each study's `results/summary.json`: one entry per headline figure, owned by the study that measures it.

An entry is the figure with its interval and goal, stamped with the command and date of the result it was read
from. Regenerating a study rewrites its entries from its results with the stamps they were written with, so the file
comes out the same; a tranche (one pool of several) merges its pools into the figure's entry and keeps the others'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from studies.protocol.records import StudyFileError


class SummaryError(StudyFileError):
    """A summary.json that is not a JSON object of figure entries (truncated, cut, not UTF-8, NaN or Infinity in it):
    the message names the file and what to do."""


def read_summary(path: Path) -> dict[str, Any]:
    """A study's summary.json ({} when there is none yet); one that cannot be read is a `SummaryError` naming it."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return {}
    fix = f"restore it from git (`git checkout -- {path}`); the study's regenerate rewrites it from the records"

    def no_constant(name: str) -> Any:
        raise SummaryError(f"summary {path}: holds {name}, not a number; {fix}")

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SummaryError(f"summary {path}: cannot be read as UTF-8 text ({e}); {fix}") from None
    try:
        obj = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        why = "empty" if not text.strip() else f"not whole JSON ({e.msg}, line {e.lineno})"
        raise SummaryError(f"summary {path}: {why}; {fix}") from None
    except RecursionError:
        raise SummaryError(f"summary {path}: nested too deeply to be a summary; {fix}") from None
    if not isinstance(obj, dict) or not all(isinstance(e, dict) for e in obj.values()):
        raise SummaryError(f"summary {path}: not an object of figure entries (each an object); {fix}")
    return obj


def write_summary(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Write the entries (keys sorted), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
    tmp.replace(path)


def stamped(entries: dict[str, Any], command: str, date: str) -> dict[str, Any]:
    return {k: {**e, "command": command, "date": date} for k, e in entries.items()}


def merge_pools(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new`'s entries over `old`'s; an entry with per-pool figures (`pools`) keeps the pools only `old` has."""
    out = dict(old)
    for key, e in new.items():
        if "pools" in e:
            e = {**e, "pools": {**old.get(key, {}).get("pools", {}), **e["pools"]}}
        out[key] = e
    return out
