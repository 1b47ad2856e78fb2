"""A study's runs in one compact file, `results/records.jsonl.gz`: what every committed figure is regenerated from.

One JSON object a line, gzip'd with a fixed mtime (the same runs give the same bytes), of two kinds:
1) `{"kind": "run", "id": ...}`: one finished run, reduced to what the study's analysis and figures read. `id` names
   the record it was made from (for a `compare` run: the record file's name in the records folder, a hash of the code
   and the job, `bench.jobs`), so its provenance can be checked against the commit that made it; git history keeps
   the full records. `compact` reduces a `bench.run` record: curves at every evaluation kept whole, the per-step
   series a figure draws kept (`KEEP`) and the ones the GPU cost model prices a step by (`bench.costmodel.GPU_SERIES`:
   rows per round and samples trained, so a revised model reprices every run), the others reduced to the statistics
   the tables read over the first `steps` (`bench.analysis.head_stat`) and to the cumulative CPU seconds at each
   evaluation (`bench.compute`; a run without the GPU series keeps its GPU-model seconds as they were computed), and
   where the run has them, its prompt + generated tokens and its length-priced GPU seconds at each evaluation
   (`bench.compute.LENGTH_AXES`: the per-step length series are not kept, so a revised length model does not
   reprice a compact run).
2) `{"kind": "result", "name": ...}`: one committed result: what no run gives (settings, machine, testbed and pool
   digests, a registration's provenance and content as they were when the result was written, the command and date)
   and the ids of the runs it reads, per phase.

The file is whole or refused (`read`): every result line ends with the same `digest`, the sha256 of the file's lines
with that field left out, so a curve edited by hand, a line cut off or a result line lost is an error naming the file
and what to do (`RecordsError`), as are a file that is not gzip, is empty, truncated or ends mid-line; runs come
before results and the last line is a result, so a file that lost its results never reads as "nothing recorded" and
the next save (`update`) never drops its runs. A file written before the digest (every study's, to commit cc18bcd:
the same lines, no `digest`) is read with the other checks and gets its digest when next written (`seal`).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

RUN_FIELDS = ("key", "pool", "arm", "lr", "seed", "steps", "phase", "eval_step", "accuracy", "eval_tokens")
"""What every run keeps (a sweep run: nothing more; the lr choice and the equal-lr table read only these)."""
MAIN_FIELDS = ("per_level", "eval_samples", "sampled_check", "seconds", "load", "cpu", "prior", "epochs")
"""What a main run keeps beside them, where it has them."""
KEEP = ("no_signal_share",)
"""Per-step series kept whole (the figure draws them)."""
HEAD = {
    "mean": ("no_signal_share", "samples_per_step", "tokens_per_step"),
    "nanmean": ("zero_adv_share",),
    "median": ("time_step_s", "time_generate_s", "time_train_s"),
}
"""Per-step series reduced to these statistics over the first `steps` steps (`bench.analysis.head_stat`)."""


def compact(record: dict[str, Any], steps: int, run_id: str) -> dict[str, Any]:
    """A `bench.run` record as a compact run (module docstring); `steps`: the horizon the tables read."""
    from reinforce_ada.bench.analysis import head_stat
    from reinforce_ada.bench.compute import LENGTH_AXES, axis_x
    from reinforce_ada.bench.costmodel import GPU_SERIES

    out: dict[str, Any] = {"kind": "run", "id": run_id, **{k: record[k] for k in RUN_FIELDS}}
    if record["phase"] != "main":
        return out
    out.update({k: record[k] for k in MAIN_FIELDS if k in record})
    out.update({k: record[k] for k in KEEP if k in record})
    priced = all(k in record for k in GPU_SERIES)
    if priced:  # whole: the GPU model reprices the run from them (`bench.compute.axis_x`)
        out.update({k: record[k] for k in GPU_SERIES})
    out["head"] = {"steps": steps}
    for stat, keys in HEAD.items():
        out["head"][stat] = {k: head_stat(record, k, steps, stat) for k in keys if k in record}
    for axis in (*(("cpu_s",) if priced else ("cpu_s", "gpu_s")), *LENGTH_AXES):
        try:
            out[f"eval_{axis}"] = axis_x(record, axis, steps_only=True)  # the prior's cost is added when read
        except (KeyError, ValueError):  # a run without the series that axis needs: the axis is left out, as before
            pass
    return out


DIGEST = "digest"
"""The field every result line ends with: the sha256 of the file's lines with it left out (`_digest`)."""


class StudyFileError(ValueError):
    """A file a study reads (its records, its summary.json, a raw record, a plan) that cannot be used as it is: the
    message names the file and what to do; the study's commands print it as one line (`explained`)."""


class RecordsError(StudyFileError):
    """A records file that is not whole (not gzip, empty, truncated, cut, a line that is not a record, a digest that
    does not match): the message names the file and what to do."""


@contextlib.contextmanager
def explained() -> Iterator[None]:
    """A `StudyFileError` inside becomes one line on stderr and exit status 1 (`SystemExit`), not a traceback."""
    try:
        yield
    except StudyFileError as e:
        raise SystemExit(f"error: {e}") from None


def seal_all(folder: Path) -> list[Path]:
    """`seal` every records file under `folder` (a study's results, its later registrations' folders included) that
    was written before digests; returns those sealed, each said on stdout."""
    done = [p for p in sorted(Path(folder).rglob("records.jsonl.gz")) if seal(p)]
    for p in done:
        print(f"sealed {p}: the records file now carries its sha256 (`protocol.records.DIGEST`)")
    return done


def _restore(path: Path) -> str:
    return (
        f"restore it from git (`git checkout -- {path}`) or from the copy it was made from; the runs it held are "
        "in git history"
    )


def _digest(lines: list[str]) -> str:
    return hashlib.sha256(("\n".join(lines) + "\n").encode()).hexdigest()


def _suffix(digest: str) -> str:
    return f',"{DIGEST}":"{digest}"}}'


def write(path: Path, runs: Iterable[dict[str, Any]], results: Iterable[dict[str, Any]]) -> None:
    """Runs (keys sorted, deduplicated by id: two different runs under one id is an error) then results (keys in
    their order, each ending with the file's `DIGEST`), each sorted by id or name, atomically. An existing file that
    is not whole is never replaced (`read` first: a `RecordsError` naming it)."""
    if path.exists() or path.is_symlink():
        read(path)
    _write(path, runs, results)


def _write(path: Path, runs: Iterable[dict[str, Any]], results: Iterable[dict[str, Any]]) -> None:
    by_id: dict[str, str] = {}
    for r in runs:
        line = json.dumps({**r, "kind": "run"}, sort_keys=True, separators=(",", ":"))
        if by_id.setdefault(r["id"], line) != line:
            raise ValueError(f"two different runs share the id {r['id']!r}")
    lines = [by_id[i] for i in sorted(by_id)]
    named = {}
    for res in results:
        # keys in their order, not sorted: a result's pools and arms are in run order, which its tables follow
        body = {k: v for k, v in res.items() if k != DIGEST}
        named[res["name"]] = json.dumps({"kind": "result", **body}, separators=(",", ":"))
    if not named:
        raise ValueError(f"{path}: a records file holds at least one result (its runs are read by none)")
    result_lines = [named[n] for n in sorted(named)]
    digest = _digest(lines + result_lines)
    lines += [line[:-1] + _suffix(digest) for line in result_lines]  # each result line ends with `}`
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(("\n".join(lines) + "\n").encode())
    tmp.replace(path)


def _text(path: Path) -> str:
    """The file's text, or a `RecordsError` saying why it is not a whole gzip'd text file."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise RecordsError(f"records file {path}: no such file") from None
    except IsADirectoryError:
        raise RecordsError(f"records file {path}: a folder, not a records file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        why = "truncated (the gzip stream ends early)" if isinstance(e, EOFError) else f"not a whole gzip file ({e})"
        raise RecordsError(f"records file {path}: {why}; {_restore(path)}") from None
    except OSError as e:
        raise RecordsError(f"records file {path}: cannot be read ({e.strerror or e})") from None
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise RecordsError(f"records file {path}: not UTF-8 text (byte {e.start}); {_restore(path)}") from None


def read(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(runs by id, results by name) of a whole records file, its digest checked; else a `RecordsError` naming the
    file and what to do (module docstring). The results come without their `DIGEST`."""
    runs, results, _ = _read(path)
    return runs, results


def _read(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], str | None]:
    """`read`, and the file's digest (None: written before digests)."""
    text = _text(Path(path))
    if not text:
        raise RecordsError(f"records file {path}: empty (no run and no result); {_restore(path)}")
    if not text.endswith("\n"):
        raise RecordsError(f"records file {path}: cut off mid-line (its last line is not whole); {_restore(path)}")
    lines = text[:-1].split("\n")
    runs: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, Any]] = {}
    digests: list[str | None] = []
    body: list[str] = []
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise RecordsError(f"records file {path}: line {n} is not a JSON record; {_restore(path)}") from None
        kind = obj.pop("kind", None) if isinstance(obj, dict) else None
        if kind == "run" and isinstance(obj.get("id"), str) and not results:
            runs[obj["id"]] = obj
            body.append(line)
        elif kind == "result" and isinstance(obj.get("name"), str) and _run_ids(obj) is not None:
            digest = obj.pop(DIGEST, None)
            digests.append(digest if isinstance(digest, str) else None)
            end = _suffix(digest) if isinstance(digest, str) else None
            body.append(line[: -len(end)] + "}" if end and line.endswith(end) else line)
            results[obj["name"]] = obj
        else:
            what = "a run after the results" if kind == "run" and results else f"not a run or a result (kind {kind!r})"
            raise RecordsError(f"records file {path}: line {n} is {what}; {_restore(path)}")
    if not results:
        raise RecordsError(
            f"records file {path}: {len(runs)} runs and no result line (the file was cut, or its results lost): "
            f"it is not read as 'nothing recorded'; {_restore(path)}"
        )
    if any(digests) and (len(set(digests)) != 1 or digests[0] != _digest(body)):
        raise RecordsError(
            f"records file {path}: its content does not match the digest its result lines record (a run or result "
            f"edited, added or removed after it was written); {_restore(path)}"
        )
    return runs, results, digests[0]


def digest(path: Path) -> str | None:
    """The sha256 a whole records file carries (checked), None for one written before digests."""
    return _read(path)[2]


def seal(path: Path) -> bool:
    """Give a whole records file written before digests (commit cc18bcd's) its digest: the same runs and results,
    rewritten with `DIGEST`; returns whether it was rewritten."""
    runs, results, sha = _read(path)
    if sha is not None:
        return False
    _write(path, runs.values(), results.values())
    return True


def _run_ids(result: dict[str, Any]) -> list[str] | None:
    """A result line's run ids (`runs`: phase -> ids), None when it is not that shape."""
    phases = result.get("runs")
    if not isinstance(phases, dict) or not all(isinstance(ids, list) for ids in phases.values()):
        return None
    ids = [i for v in phases.values() for i in v]
    return ids if all(isinstance(i, str) for i in ids) else None


def runs_of(result: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A result's runs per phase, in the order it lists them; a missing id is an error naming it."""
    missing = [i for ids in result["runs"].values() for i in ids if i not in runs]
    if missing:
        raise ValueError(f"result {result['name']!r} reads runs the records file lacks: {missing[:3]}")
    return {phase: [runs[i] for i in ids] for phase, ids in result["runs"].items()}


def update(path: Path, result: dict[str, Any], runs: Iterable[dict[str, Any]]) -> None:
    """Put one result (and its runs) into the records file, replacing a result of the same name; runs no result reads
    any more are dropped (git history keeps them). A file there that is not whole is refused (`RecordsError`), never
    replaced."""
    old_runs, old_results = read(path) if path.exists() or path.is_symlink() else ({}, {})
    results = {**old_results, result["name"]: result}
    merged = {**old_runs, **{r["id"]: r for r in runs}}
    used = {i for res in results.values() for ids in res["runs"].values() for i in ids}
    _write(path, [r for i, r in merged.items() if i in used], results.values())
