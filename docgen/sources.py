"""What the results pages read: a study's result JSONs and its compact records (`results/records.jsonl.gz`), the
runs' seconds for the cost in CPU-hours, and a result's machine in words. Every file comes through
`docgen.published` (numbers finite, text safe, a missing field named) and the records through the studies' one
reader, `studies.protocol.records.read` (a file that is not whole, or whose digest does not match, is refused); the
files a study's page read are listed in its error if its page cannot be built (`reading`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docgen.published import Doc, PageDataError, checked, load_json, load_toml, number_ok, relative, safe, where

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"
reading: list[str] = []
"""The files read since `docgen.results.study_pages` began the current study's page (named in its error)."""


def read_json(path: Path) -> Any:
    """A result JSON, checked (`docgen.published.load_json`)."""
    reading.append(relative(path))
    return load_json(path)


def read_toml(path: Path) -> Any:
    """A registration, checked as a result JSON is (`docgen.published.load_toml`)."""
    reading.append(relative(path))
    return load_toml(path)


def records_path(study: str, registration: str | None = None) -> Path:
    return STUDIES / study / "results" / (registration or "") / "records.jsonl.gz"


def read_records(study: str, registration: str | None = None) -> tuple[dict[str, dict], dict[str, dict]]:
    """The study's compact records (a later registration's, in `results/<registration>/`, with `registration`):
    runs by id, results by name (empty when it has none yet). Read by the studies' reader, whole and with its digest
    checked (a `studies.protocol.records.RecordsError` otherwise); each result's text made safe, its numbers checked
    where a page publishes them (`cpu_hours`)."""
    from studies.protocol import records

    path = records_path(study, registration)
    if not path.exists() and not path.is_symlink():
        return {}, {}
    reading.append(relative(path))
    runs, results = records.read(path)
    name = relative(path)
    by_id = Doc(runs)
    by_id.origin = (name, "runs")
    return by_id, {k: checked(v, name, f"result {k}", strict=False) for k, v in results.items()}


def records_digests(study: str) -> list[tuple[str, str | None]]:
    """Every records file of the study (its later registrations' included), each with the sha256 it carries, checked
    (None: written before digests, sealed at its next write)."""
    from studies.protocol import records

    files = sorted((STUDIES / study / "results").rglob("records.jsonl.gz"))
    return [(p.relative_to(STUDIES / study).as_posix(), records.digest(p)) for p in files]


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
    if not number_ok(secs):
        raise PageDataError(f"run {run.get('id')!r}: its recorded seconds ({secs!r}) are not a number to publish")
    return float(secs), int(m.group(1)) if m else 1


def cpu_hours(runs: dict[str, dict], ids: set[str] | None = None) -> tuple[float, int, int]:
    """Sum of recorded run seconds (a run's total, else its wall-clock, else its steps' times) x torch threads, in
    hours; runs counted; runs that carry seconds."""
    chosen = [r for i, r in runs.items() if ids is None or i in ids]
    try:
        timed = [run_seconds(r) for r in chosen]
    except PageDataError as e:
        origin = getattr(runs, "origin", None)
        raise PageDataError(f"{where(origin)}: {e}" if origin else str(e)) from None
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
        return safe(f"{m.get('cpu', '?')}, {m.get('logical_cpus', '?')} CPUs, Python {m.get('python', '?')}")
    return safe(str(m)) if m else "not recorded"
