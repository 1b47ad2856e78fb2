"""What the results pages read: a study's result JSONs and its compact records (`results/records.jsonl.gz`), the
runs' seconds for the cost in CPU-hours, and a result's machine in words."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def read_records(study: str, registration: str | None = None) -> tuple[dict[str, dict], dict[str, dict]]:
    """The study's compact records (a later registration's, in `results/<registration>/`, with `registration`):
    runs by id, results by name (empty when it has none yet)."""
    path = STUDIES / study / "results" / (registration or "") / "records.jsonl.gz"
    runs: dict[str, dict] = {}
    results: dict[str, dict] = {}
    if path.exists():
        with gzip.open(path, "rt") as fh:
            for line in fh:
                r = json.loads(line)
                (runs if r["kind"] == "run" else results)[r.get("id") or r.get("name")] = r
    return runs, results


def later_registrations(study: str) -> list[str]:
    """A study's later registrations that keep their own results folder (`results/<name>/summary.json`)."""
    return sorted(p.parent.name for p in (STUDIES / study / "results").glob("*/summary.json"))


def run_seconds(run: dict[str, Any]) -> tuple[float, int]:
    """A run's recorded seconds and torch threads (0 seconds when the record keeps none: sweep runs)."""
    s = run.get("seconds")
    steps = run.get("time_step_s")
    secs = s.get("total", 0.0) if isinstance(s, dict) else (s or run.get("wall_s") or 0.0)
    if not secs and isinstance(steps, list):  # a record keeping only its steps' times: those, evaluation left out
        secs = sum(x for x in steps if isinstance(x, int | float))
    m = re.search(r"(\d+) threads?", str(run.get("cpu", "")))
    return float(secs), int(m.group(1)) if m else 1


def cpu_hours(runs: dict[str, dict], ids: set[str] | None = None) -> tuple[float, int, int]:
    """Sum of recorded run seconds (a run's total, else its wall-clock, else its steps' times) x torch threads, in
    hours; runs counted; runs that carry seconds."""
    chosen = [r for i, r in runs.items() if ids is None or i in ids]
    timed = [run_seconds(r) for r in chosen]
    return sum(s * t for s, t in timed) / 3600, len(chosen), sum(1 for s, _ in timed if s > 0)


def result_run_ids(result: dict[str, Any]) -> set[str]:
    runs = result.get("runs") or {}
    out: set[str] = set()
    for v in runs.values() if isinstance(runs, dict) else [runs]:
        if isinstance(v, list):
            out |= {x for x in v if isinstance(x, str)}
        elif isinstance(v, dict):
            out |= {x for x in v.values() if isinstance(x, str)} | {x for x in v if isinstance(x, str)}
    return out


def machine_text(m: Any) -> str:
    if isinstance(m, dict):
        return f"{m.get('cpu', '?')}, {m.get('logical_cpus', '?')} CPUs, Python {m.get('python', '?')}"
    return str(m) if m else "not recorded"
