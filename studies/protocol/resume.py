"""A pre-registered compare study that resumes across sessions on machines wiped between them: the committed compact
records file (`protocol.records`) is the only state a session leaves.

    ctx = session(study, places, package)   # plan with `package`, run what is missing, record runs as they finish

1) The runs: `protocol.jobrunner`, in a subprocess with `package` (the registration's frozen worktree) first on the
   path, plans every job, runs those that are neither recorded nor in the raw folder, and writes its plan (each job's
   id and key, the lr choice, the testbed and pools). What ran is the registered code's; what is skipped, compacted
   and reported is this checkout's.
2) The records: while it runs, every `poll_s` seconds, when it ends and when it is stopped, each new raw record of a
   planned job is compacted by the study (`Study.compact`) into the records file with the result's context
   (`records.update`: written whole to a temporary file and renamed, so a kill mid-write leaves the previous file).
   Committing that file is all a session must do before it stops; a later session on a fresh clone, its raw folder
   empty, runs only what is missing, and its lr choice reads the recorded sweep runs' curves.
3) The context lists the finished runs per phase in the plan's order (the order `bench.compare.run_compare` returns
   them in), so the same finished runs give the same result whether their raw records are at hand or not.
4) A records file that is not whole (`records.read`), a raw record that is not readable or fails its digest
   (`bench.jobs._read_record`) or a plan that is not JSON stops the session with one line naming the file and what
   to do, before anything runs (the records file) or with the runner stopped (`session`); nothing is overwritten.
5) Arms stopped by a dated amendment (`Study.stopped`) leave the plan; their recorded runs stay in the records file
   under the context's `runs["stopped"]`, so what was seen before stopping them can still be read off them.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from studies.protocol import records
from studies.protocol.jobrunner import CHANGED, CURVE, PHASES, Request, StudyChanged, plan_and_run
from studies.protocol.worktree import ROOT

PLAN_META = ("machine", "arms", "code_fingerprint", "git_commit", "testbed", "pools")
"""What the result's context takes from the runner's plan (what no run gives)."""


@dataclass(frozen=True)
class Places:
    """Where a study's state lives: only `records` (and the result under `out`) is committed."""

    records: Path
    """The compact records file (committed)."""
    raw: Path
    """Finished runs' full records (scratch: lost with the machine, and not needed once compacted)."""
    out: Path
    """Where the result (NAME.json, NAME.png) goes."""
    run_root: Path
    """Scratch: the pools and the runs' folders."""

    @property
    def plan(self) -> Path:
        return self.run_root / "plan.json"

    @property
    def request(self) -> Path:
        return self.run_root / "request.json"


@dataclass(frozen=True)
class Study:
    """What `session` needs of a study."""

    name: str
    """The result's name in the records file."""
    config: dict[str, Any]
    """`bench.compare.CompareConfig` fields of the registration (every registered pool: `--pools` limits what runs,
    never what is planned, so a partial session cannot drop another pool's runs from the result)."""
    compact: Callable[[dict[str, Any], str], dict[str, Any]]
    """A full record and its id -> its compact run (`records.compact` plus the study's own fields)."""
    meta: dict[str, Any]
    """The context's fields beside the plan's (the settings, the registration as it is, the command)."""
    stopped: frozenset[str] = frozenset()
    """Arms a dated amendment stopped: not in `config`'s arms; their recorded runs are not sent to the runner (whose
    plan no longer holds them) and stay in the records file, listed under the context's `runs["stopped"]`, which
    no phase of the result reads (module docstring, 5)."""


class Runner(Protocol):
    """A started runner: `subprocess.Popen`'s part that `session` uses."""

    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def recorded(name: str, path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """(the runs the result `name` reads, by id; its context), or ({}, None) before its first record."""
    if not path.exists():
        return {}, None
    runs, results = records.read(path)
    ctx = results.get(name)
    if ctx is None:
        return {}, None
    records.runs_of(ctx, runs)  # a run the context lists and the file lacks: an error naming it
    return {i: runs[i] for ids in ctx["runs"].values() for i in ids}, ctx


def request(study: Study, places: Places, package: Path, run: bool, run_pools: list[str] | None) -> Request:
    runs, _ = recorded(study.name, places.records)
    return Request(
        config={**study.config, "run_root": str(places.run_root)},
        cache=str(places.raw),
        plan=str(places.plan),
        recorded=[{"id": i, **{k: r[k] for k in CURVE}} for i, r in runs.items() if r.get("arm") not in study.stopped],
        run=run,
        run_pools=run_pools,
        package=str(package),
    )


def spawn(req: Request, places: Places) -> Runner:
    """The runner in a subprocess (its own process group, so stopping it stops its workers) with only the package
    of `req.package` on the path: the registered code, imported apart from this checkout's."""
    places.request.parent.mkdir(parents=True, exist_ok=True)
    places.request.write_text(json.dumps(dataclasses.asdict(req)))
    env = {**os.environ, "PYTHONPATH": str(Path(req.package or "").parent)}
    cmd = [sys.executable, "-m", "studies.protocol.jobrunner", str(places.request)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)


@dataclass
class Finished:
    """A runner that has already ended (`in_process`)."""

    returncode: int | None = 0

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode or 0


def in_process(req: Request, places: Places) -> Runner:
    """The runner in this process, with the package this process imported (tests; `StudyChanged` propagates)."""
    plan_and_run(req, lambda m: print(m, flush=True))
    return Finished(0)


def _stop(proc: Runner) -> None:
    """SIGTERM to the runner's process group, SIGKILL if it has not ended within 30 s."""
    pid = getattr(proc, "pid", None)
    if pid is None or proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, None)):
        try:
            os.killpg(pid, sig)
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _plan(places: Places) -> dict[str, Any] | None:
    try:
        return json.loads(places.plan.read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise records.RecordsError(
            f"plan {places.plan}: not readable JSON ({e}); it is scratch: delete it and start the session again"
        ) from None


def _raw(path: Path) -> dict[str, Any]:
    """A finished run's raw record, read as the package reads it (its digest checked); a damaged one is a
    `RecordsError` naming it."""
    from reinforce_ada.bench.jobs import _read_record
    from reinforce_ada.errors import ConfigError

    try:
        return _read_record(path)
    except ConfigError as e:
        raise records.RecordsError(f"{e} (the next session runs its job again)") from None


def session(
    study: Study,
    places: Places,
    package: Path,
    *,
    run: bool = True,
    run_pools: list[str] | None = None,
    poll_s: float = 30.0,
    launch: Callable[[Request, Places], Runner] = spawn,
) -> dict[str, Any]:
    """Plan the study with `package`, run what is missing (`run`; only `run_pools`' jobs when given), record every
    finished run as it finishes; returns the result's context. A plan that disagrees with the records raises
    `StudyChanged`, naming the pool and arm, before anything runs; a records file, raw record or plan that cannot be
    read is a `SystemExit` with one line naming it (module docstring, 4)."""
    try:
        return _session(study, places, package, run, run_pools, poll_s, launch)
    except records.RecordsError as e:
        raise SystemExit(f"error: {e}") from None


def _session(
    study: Study,
    places: Places,
    package: Path,
    run: bool,
    run_pools: list[str] | None,
    poll_s: float,
    launch: Callable[[Request, Places], Runner],
) -> dict[str, Any]:
    places.plan.unlink(missing_ok=True)  # a plan of an earlier session is no plan of this one
    proc = launch(request(study, places, package, run, run_pools), places)
    try:
        while proc.poll() is None:
            try:
                proc.wait(timeout=poll_s)
            except subprocess.TimeoutExpired:
                pass
            plan = _plan(places)
            if plan is not None and proc.poll() is None:
                checkpoint(study, places, plan)
    finally:
        _stop(proc)
        plan = _plan(places)
        ctx = checkpoint(study, places, plan) if plan is not None else None  # stopped or not: keep what finished
    if proc.returncode == CHANGED:
        raise StudyChanged("the job runner refused the plan (its message is above)")
    if proc.returncode != 0 or ctx is None:
        raise SystemExit(f"the job runner failed (exit status {proc.returncode})")
    return ctx


def checkpoint(study: Study, places: Places, plan: dict[str, Any]) -> dict[str, Any]:
    """Compact every planned job's new raw record into the records file and update the result's context (written
    only when either changed); returns the context."""
    runs, prev = recorded(study.name, places.records)
    fresh = {}
    for e in (e for phase in PHASES for e in plan[phase]):
        f = places.raw / f"{e['id']}.json.gz"
        if e["id"] not in runs and f.exists():
            fresh[e["id"]] = study.compact(_raw(f), e["id"])
    have = runs.keys() | fresh.keys()
    parked = [i for i, r in runs.items() if r.get("arm") in study.stopped]  # kept, read by no phase (`Study.stopped`)
    ids = {phase: [e["id"] for e in plan[phase] if e["id"] in have] for phase in PHASES}
    if prev is not None and not plan["final"]:  # the plan does not reach every phase yet: its recorded runs stay
        for phase in PHASES:
            planned = {e["id"] for e in plan[phase]}
            ids[phase] += [i for i in prev["runs"].get(phase, []) if i not in planned and i not in parked]
    if parked:
        ids["stopped"] = parked
    ctx = context(study, plan, ids, prev)
    if fresh or ctx != prev:
        records.update(places.records, ctx, fresh.values())
    return ctx


def context(
    study: Study, plan: dict[str, Any], ids: dict[str, list[str]], prev: dict[str, Any] | None
) -> dict[str, Any]:
    """The result's context: the plan's testbed, pools, code and lr choice, the study's `meta`, the runs' ids.
    `date` is the first record's and stays; `recorded` is the last write's; the lr choice is the last final plan's
    (a plan still in its sweep has made none yet)."""
    today = datetime.date.today().isoformat()
    before = (prev or {}).get("meta") or {}
    meta: dict[str, Any] = {"date": before.get("date", today)}
    meta.update({k: plan[k] for k in PLAN_META})
    meta.update(study.meta)
    lrs = plan if plan["final"] or not before else before
    meta.update(recorded=today, lrs_by_pool=lrs.get("lrs_by_pool", {}), lr_sweep=lrs.get("lr_sweep", {}))
    listed = {i for phase in PHASES for i in ids[phase]}
    pools_run = [p for p in plan["pools"] if any(e["pool"] == p and e["id"] in listed for e in plan["main"])]
    ctx = {"name": study.name, "meta": meta, "pools_run": pools_run, "runs": ids}
    return json.loads(json.dumps(ctx, default=str))
