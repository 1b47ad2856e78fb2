"""Each study's `results/summary.json`: one entry per headline figure, owned by the study that measures it.

An entry is the figure with its interval and goal, stamped with the command and date of the result it was read
from. Regenerating a study rewrites its entries from its results with the stamps they were written with, so the file
comes out the same; a tranche (one pool of several) merges its pools into the figure's entry and keeps the others'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
