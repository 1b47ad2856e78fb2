"""Running many `bench.run` jobs: worker processes, progress with an ETA, and the records that make a long benchmark
resumable.

Each finished run's record is kept under a hash of the job (its machine paths replaced by the digests of the weights
and the pool) and of the code (`code_fingerprint`), gzip'd and written atomically. A later call reuses every record
it finds, so a crashed or stopped benchmark resumes where it was, adding an arm re-runs only that arm, and a records
folder committed with the results lets the run continue in another session on another machine -- with the same code:
a changed source file changes every key.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from reinforce_ada.bench.run import Job, run_job
from reinforce_ada.errors import ConfigError, RunStopped
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import strategy_class


def code_fingerprint(root: str | Path | None = None) -> str:
    """sha256 of the package's source (every .py file, committed or not): a run's records are reused only by the
    same code. `root`: another copy of the package (e.g. a worktree of the commit whose records are read)."""
    import hashlib

    root = Path(__file__).resolve().parents[1] if root is None else Path(root).resolve()
    if not (root / "__init__.py").exists():
        raise ValueError(f"{root} is not a reinforce_ada package folder (no __init__.py)")
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


class RecordHook(Protocol):
    """Called by `run_jobs` with each job and the path its record is kept under, before the lookup: it may put a
    record there (e.g. another commit's run of the same job, after its own check). `set_identity` is told the pools'
    digests once they are known (`bench.compare.run_compare`)."""

    def __call__(self, job: Job, path: Path) -> None: ...

    def set_identity(self, identity: dict[str, str]) -> None: ...


MACHINE_FIELDS = ("run_dir", "model_path", "train_path", "eval_path")
"""Job fields that are paths on this machine: a record is keyed by the weights' and the pool's digests instead."""


def record_schema(package: str | Path) -> dict[str, Any]:
    """The `Job` and `StrategyConfig` fields (with the strategy's defaults) of another copy of the package: what
    its records were keyed with. Read in a subprocess, so the other copy is imported apart from this one."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import dataclasses, json; from reinforce_ada.bench.run import Job\n"
        "try:\n    from reinforce_ada.sampling.configure import strategy_config\n"
        "    from reinforce_ada.sampling.strategies import STRATEGIES\n"
        "    s, a = strategy_config().to_dict(), 0\n"
        "    per = {n: strategy_config(n).to_dict() for n in STRATEGIES if n != 'auto'}\n"
        "except ImportError:  # 0.3: one flat StrategyConfig of every strategy's fields\n"
        "    from reinforce_ada.sampling.config import StrategyConfig; s, a = dataclasses.asdict(StrategyConfig()), 1\n"
        "    per = None\n"
        "try:  # 0.5: a switch's value brings its feature's options\n"
        "    from reinforce_ada.sampling.options import FEATURES as F\n"
        "    feat = {w: {v: [f.name for f in dataclasses.fields(c)] for v, c in t.items()} for w, t in F.items()}\n"
        "except ImportError:\n"
        "    feat = {}\n"
        "print(json.dumps({'job': [f.name for f in dataclasses.fields(Job)], 'strategy': s, 'all_fields': a, "
        "'strategies': per, 'features': feat}, default=str))"
    )
    src = Path(package).resolve().parent
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(src)},
        timeout=120,
    )
    if out.returncode != 0:
        raise ValueError(f"cannot read the record schema of {package}: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


def _record_path(
    cache: Path,
    job: Job,
    fingerprint: str,
    identity: dict[str, str] | None = None,
    schema: dict[str, Any] | None = None,
) -> Path | None:
    """The record's file: a hash of the code, the job (machine paths replaced by `identity`'s digests) and, with
    `schema` (another copy's fields, `record_schema`), the job as that copy would have written it -- None when that
    copy could not have run this job (a strategy option it did not have is set)."""
    import hashlib
    import json

    fields = {k: v for k, v in dataclasses.asdict(job).items() if k not in MACHINE_FIELDS}
    fields["strategy"] = strat = job.strategy.to_dict()  # flat, as every version keyed it
    for late in (
        "train",
        "max_tokens",
        "eval_every_tokens",
        "value_errors",
    ):  # unset, a run keys as before the field existed
        if not fields.get(late):
            fields.pop(late, None)
    if schema is not None:
        theirs, defaults = set(schema["job"]), schema["strategy"]
        if "train" in fields and "train" not in theirs:
            return None
        fields = {k: v for k, v in fields.items() if k in theirs}
        if not schema.get("all_fields", True) and "strategies" in schema:  # options-based: its own options
            theirs_opts = (schema["strategies"] or {}).get(job.strategy.name)
            if theirs_opts is None:
                return None  # the other copy has no such strategy
            on = [n for sw, t in schema.get("features", {}).items() for n in t.get(str(strat.get(sw)), [])]
            theirs_opts = {**theirs_opts, **{n: strat[n] for n in on if n in strat}}  # the features this job turns on
            ours = strategy_config(job.strategy.name).to_dict()
            if any(k not in theirs_opts and (k not in ours or strat[k] != ours[k]) for k in strat):
                return None  # an option the other copy does not have is set: it could not have run this job
            # theirs also keyed the options of features that are off here (0.4 listed every rule's): at their values
            fields["strategy"] = {k: strat.get(k, theirs_opts[k]) for k in theirs_opts}
        elif schema.get("all_fields", True):  # 0.3 keyed every strategy's fields, None for "the strategy's default"
            ours = strategy_config(job.strategy.name).to_dict()
            if any(k not in defaults and strat[k] != ours[k] for k in strat):
                return None
            fields["strategy"] = {
                k: (None if d is None and k in strat and strat[k] == ours[k] else strat.get(k, d))
                for k, d in defaults.items()
            }
    fields["data"] = (identity or {}).get(job.pool) or [job.model_path, job.train_path, job.eval_path]
    key = json.dumps([fingerprint, fields], sort_keys=True, default=str)
    return cache / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json.gz"


DIGEST = "digest"
"""A record's own field: the sha256 of the rest of it, so a record edited by hand (an accuracy set to 1.0) is refused
when it is read, not reported. It guards against edits and damage, not against someone who recomputes it."""


def _digest(rec: dict[str, Any]) -> str:
    import hashlib
    import json

    body = {k: v for k, v in rec.items() if k != DIGEST}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _read_record(path: Path, unchecked: list[str] | None = None) -> dict[str, Any]:
    """A record, its digest checked (and dropped: two runs of one job compare equal field by field); a record that
    is not readable JSON, or whose digest does not match, is a ConfigError naming the file and what to do. A record
    written before records had a digest is accepted, its path added to `unchecked` (a report says how many)."""
    import gzip
    import json
    import zlib

    try:
        with gzip.open(path, "rt") as f:
            rec = json.load(f)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(
            f"run record {path}: not a readable gzip'd JSON record ({e}); delete it to run it again"
        ) from None
    if not isinstance(rec, dict):
        raise ConfigError(f"run record {path}: not a record (a JSON object); delete it to run it again")
    if DIGEST not in rec:
        if unchecked is not None:
            unchecked.append(str(path))
        return rec
    if rec.pop(DIGEST) != _digest(rec):
        raise ConfigError(
            f"run record {path}: its content does not match its digest (edited or damaged after the run wrote it); "
            "delete it to run it again"
        )
    return rec


def _write_record(path: Path, rec: dict[str, Any]) -> None:
    """Atomically (a crash never leaves half a record), gzip'd with fixed mtime (same bytes for the same run), with
    its digest (`DIGEST`)."""
    import gzip
    import json

    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(json.dumps({**rec, DIGEST: _digest(rec)}, separators=(",", ":")).encode())
    tmp.replace(path)


def run_jobs(
    jobs: list[Job],
    workers: int,
    log: Callable[[str], None],
    cache: Path | None = None,
    fingerprint: str = "",
    identity: dict[str, str] | None = None,
    only_cached: bool = False,
    schema: dict[str, Any] | None = None,
    carry: RecordHook | Callable[[Job, Path], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every job (in `workers` spawned processes when > 1); results in job order, progress with an ETA.

    With `cache`, each finished run's record is kept under a hash of the job and the code, and a later call reuses
    it: a crashed run resumes, and adding an arm re-runs only that arm's jobs (runs are deterministic). `identity`
    (pool name -> digest of the weights and the pool) replaces the jobs' machine paths in the key, so records made on
    another machine are reused. `only_cached`: run nothing; return the jobs that have records (a report on a run
    still going or stopped), in job order. `carry` (a `RecordHook`): called with each job and its record's path
    before the lookup, so records of another commit can be put in place.
    """
    t0, done, out = time.perf_counter(), 0, {}
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        unchecked: list[str] = []
        for j in jobs:
            f = _record_path(cache, j, fingerprint, identity, schema)
            if f is not None and carry is not None:
                carry(j, f)
            if f is not None and f.exists():
                out[j.key] = _read_record(f, unchecked)
        if out:
            log(f"reusing {len(out)} of {len(jobs)} runs from {cache}")
        if unchecked:
            log(f"{len(unchecked)} of them carry no digest (written before records had one): not checked for edits")
    todo = [j for j in jobs if j.key not in out]
    if only_cached:
        log(f"report only: {len(out)} of {len(jobs)} runs have records, {len(todo)} not run (yet)")
        return [out[j.key] for j in jobs if j.key in out]
    weight = {  # longest first: a token budget costs about the same in every arm, a step count by its samples
        j.key: j.max_tokens or j.steps * strategy_class(j.strategy.name).cost_hint(j.strategy.options) for j in todo
    }
    total = sum(weight.values())
    spent = 0
    by_key = {j.key: j for j in todo}

    def report(rec: dict[str, Any]) -> None:
        nonlocal done, spent
        done += 1
        spent += weight[rec["key"]]
        if cache is not None:
            path = _record_path(cache, by_key[rec["key"]], fingerprint, identity)
            assert path is not None  # no schema: every job has a path
            _write_record(path, rec)
        el = time.perf_counter() - t0
        eta = el * (total - spent) / max(spent, 1)
        log(
            f"[{done}/{len(todo)}] {rec['key']}: acc {rec['accuracy'][0]:.3f} -> {rec['accuracy'][-1]:.3f}, "
            f"{sum(rec['samples_per_step']) / rec['steps']:.0f} samples/step, {rec['seconds']['total']:.0f} s "
            f"(elapsed {el / 60:.1f} min, ETA {eta / 60:.1f} min)"
        )

    failed: dict[str, str] = {}

    def failure(j: Job, e: BaseException) -> None:
        failed[j.key] = f"{type(e).__name__}: {e}"
        log(f"FAILED {j.key}: the other runs go on, their records kept\n" + "".join(traceback.format_exception(e)))

    if workers == 1:
        for j in todo:
            try:
                out[j.key] = run_job(j)
            except Exception as e:
                failure(j, e)
                continue
            report(out[j.key])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {ex.submit(run_job, j): j for j in todo}
            for f in as_completed(futures):
                try:
                    rec = f.result()
                except Exception as e:  # one run's error must not stop the loop: the pool would still run every
                    failure(futures[f], e)  # queued job and throw its record away
                    continue
                out[rec["key"]] = rec
                report(rec)
    if failed:
        raise RunsFailed(failed, len(todo), cache)
    return [out[j.key] for j in jobs]


class RunsFailed(RunStopped):
    """Some runs of `run_jobs` raised (each error and its traceback went to the log as it happened); every other run
    finished and, with a cache, its record is kept, so the same call again runs only the failed ones."""

    def __init__(self, failed: dict[str, str], of: int, cache: Path | None) -> None:
        self.failed, self.of, self.cache = failed, of, cache
        kept = f"; the others' records are in {cache}, and the same command runs only these again" if cache else ""
        lines = "; ".join(f"{k}: {v}" for k, v in list(failed.items())[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        super().__init__(f"{len(failed)} of {of} runs failed: {lines}{more}{kept}")

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a worker process, it must reach the parent whole
        return (type(self), (self.failed, self.of, self.cache))
