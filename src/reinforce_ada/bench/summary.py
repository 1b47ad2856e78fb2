"""`benchmarks/results/summary.json`: one entry per goal (P1...), each owned by the benchmark that measures it."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any


def update_summary(
    path: str | Path, goals_: dict[str, Any], command: str, *, nested: dict[str, str] | None = None
) -> None:
    """Merge this benchmark's goals into `summary.json` (other benchmarks own the other keys).

    A goal named in `nested` is owned by another benchmark: this one only sets `summary[goal][nested[goal]]` to its
    entry (command and date included) and leaves the goal's other fields alone.
    """
    path = Path(path)
    summary = json.loads(path.read_text()) if path.exists() else {}
    stamp = {"command": command, "date": datetime.date.today().isoformat()}
    for key, g in goals_.items():
        if nested and key in nested:
            summary[key] = {**summary.get(key, {}), nested[key]: {**g, **stamp}}
        else:
            summary[key] = {**g, **stamp}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(summary.items())), indent=1) + "\n")
    tmp.replace(path)
