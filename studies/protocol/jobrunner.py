"""A compare study's jobs, planned and run by whichever `reinforce_ada` is first on the path: the runner half of a
resumable study (`protocol.resume` is the other half, in this checkout's package).

    PYTHONPATH=<frozen worktree>/src python -m studies.protocol.jobrunner REQUEST.json

Why a separate process: a registration promises that its runs are made by the commit it names, so the jobs are
planned (`bench.compare.plan_jobs`), keyed (`bench.jobs._record_path`: the name of the run's record file, its id) and
run (`bench.jobs.run_jobs`, on one job at a time in each worker: `run_each`) by that commit's package, imported here
and nowhere else; this module imports nothing else of the repository, and at import time only the standard library,
so it runs under any commit's package (a function newer than that commit, `bench.analysis.grow_grid`, is read from
this checkout's source: `package_function`).

What it does is `bench.compare.run_compare`'s order of work without its report: the lr sweep round by round (an arm
whose best lr sits at its grid's edge gets one more lr, up to `extend_sweep` times) with each pool's choice made by
the package's own `bench.analysis.choose_lrs`, then the main runs at the chosen lrs. A job is run only when it is
neither in the request's `recorded` runs (the committed compact records: their curves are all the lr choice reads)
nor in the raw records folder, so a study resumes on a wiped machine from its committed records alone. Before any
run it writes the plan (every planned job's id and key, the lr choice, the testbed and pools) where the request says,
and it refuses, naming the pool and arm, a plan whose job a recorded run holds under another id (the registration or
its code changed after runs started): a silent rerun would mix two instruments in one result.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PHASES = ("sweep", "main")
CURVE = ("key", "pool", "arm", "lr", "seed", "steps", "phase", "eval_step", "accuracy", "eval_tokens")
"""What the runner reads of a finished run (the lr choice reads the sweep runs' curves; the checks the keys)."""
CHANGED = 3
"""The exit status of a refused plan (`StudyChanged`)."""


@dataclass(frozen=True)
class Request:
    """What one runner process is asked to do (written as JSON by `protocol.resume`)."""

    config: dict[str, Any]
    """`bench.compare.CompareConfig` fields (lists for tuples)."""
    cache: str
    """The raw records folder: finished runs' full records, read and written as `bench.jobs.run_jobs` does."""
    plan: str
    """Where the plan goes (JSON, rewritten atomically before each phase runs and at the end)."""
    recorded: list[dict[str, Any]] = field(default_factory=list)
    """The runs already recorded (compact, `CURVE` fields and `id`): never run again."""
    run: bool = True
    """False: plan only (a report on what has finished)."""
    run_pools: list[str] | None = None
    """Run only these pools' jobs (the plan still covers every pool); None: all."""
    package: str | None = None
    """The `reinforce_ada` folder the jobs must be run by: the import is checked against it."""


class StudyChanged(Exception):
    """A planned job that a recorded run holds under another id, or a recorded run no longer planned."""


def entry(job: Any, run_id: str) -> dict[str, Any]:
    """A planned job as the plan lists it."""
    return {
        "id": run_id,
        "key": job.key,
        "phase": job.phase,
        "pool": job.pool,
        "arm": job.arm,
        "lr": job.lr,
        "seed": job.seed,
    }


def check(planned: list[dict[str, Any]], recorded: dict[str, dict[str, Any]], final: bool) -> None:
    """Raise `StudyChanged` naming each pool/arm whose planned job is recorded under another id; with `final` (the
    whole plan), also each recorded run the plan no longer holds."""
    by_key = {r["key"]: i for i, r in recorded.items()}
    bad = [
        f"{e['pool']}/{e['arm']}: {e['key']} is recorded as run {by_key[e['key']]} but planned as run {e['id']}"
        for e in planned
        if by_key.get(e["key"], e["id"]) != e["id"]
    ]
    if final:
        ids = {e["id"] for e in planned}
        bad += [
            f"{r['pool']}/{r['arm']}: {r['key']} (run {i}) is recorded but no longer planned"
            for i, r in recorded.items()
            if i not in ids
        ]
    if bad:
        raise StudyChanged(
            f"{len(bad)} recorded run(s) disagree with the plan -- the registration or its code changed after runs "
            "started (restore them, or register a new study with its own records file): " + "; ".join(bad[:8])
        )


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, default=str))
    os.replace(tmp, path)


def pools_task(pools: Any) -> str:
    """The warm start the pools need (`bench.testbed.pools_task`: `running_sums` for long-answer pools, never mixed);
    a registered commit from before long answers knows only the arithmetic one."""
    from reinforce_ada.bench import testbed

    return testbed.pools_task(pools) if hasattr(testbed, "pools_task") else "arithmetic"


def package_function(name: str) -> Callable[..., Any]:
    """`reinforce_ada.bench.analysis.<name>` of the package that runs the jobs; a registered commit from before the
    function existed (`grow_grid`: commit cc18bcd and older, which wrote the same loop inline) gets this checkout's
    definition of it, read from its source, never a copy (the function is pure and uses the standard library only).
    """
    import __future__

    import ast

    from reinforce_ada.bench import analysis

    if hasattr(analysis, name):
        return getattr(analysis, name)
    path = Path(__file__).resolve().parents[2] / "src" / "reinforce_ada" / "bench" / "analysis.py"
    tree = ast.parse(path.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    space: dict[str, Any] = {}
    code = compile(
        ast.Module(body=[node], type_ignores=[]), str(path), "exec", flags=__future__.annotations.compiler_flag
    )
    exec(code, {"Any": Any}, space)
    return space[name]


def portable(job: Any) -> dict[str, Any]:
    """A job as plain values for a worker process: a commit's options class composed with features (`spo`,
    `length_cap=...`, `select=mopps`) may be made at run time, and pickle could not send it before commit e3a1b77."""
    s = job.strategy
    opts = {f.name: getattr(s.options, f.name) for f in dataclasses.fields(s.options)}
    return {**{f.name: getattr(job, f.name) for f in dataclasses.fields(job)}, "strategy": [s.name, s.seed, opts]}


def rebuild(fields: dict[str, Any]) -> Any:
    """`portable`'s job again, its strategy made by the package's `strategy_config` (the same features, the same
    values)."""
    from reinforce_ada.bench.run import Job
    from reinforce_ada.sampling.configure import strategy_config

    name, seed, opts = fields["strategy"]
    return Job(**{**fields, "strategy": strategy_config(name, seed=seed, **opts)})


def run_one(fields: dict[str, Any], cache: str, fingerprint: str, identity: dict[str, str]) -> dict[str, Any]:
    """One job in a worker process: the package's own `bench.jobs.run_jobs` on it alone, which runs it and writes
    its record where a resume looks for it."""
    from reinforce_ada.bench.jobs import run_jobs

    (rec,) = run_jobs([rebuild(fields)], 1, _failures_only, Path(cache), fingerprint, identity)
    return rec


def _failures_only(line: str) -> None:
    """A worker's log: a package that handles failures logs the failing job's traceback; its progress line is the
    parent's to write."""
    if line.startswith("FAILED"):
        print(line, flush=True)


def run_each(
    todo: list[Any], workers: int, log: Callable[[str], None], cache: Path, fingerprint: str, identity: dict[str, str]
) -> None:
    """Run the jobs, `workers` at a time, each by `run_one`; a job that raises is logged with its traceback and the
    others go on, and once all have ended the phase stops naming the failed ones (`RunsFailed`). Here, not in the
    package's `run_jobs`, because the registered commit's `run_jobs` may predate its own failure handling: there, one
    raising job ended the loop while the pool still ran every queued job and threw its record away."""
    import multiprocessing
    import traceback
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from reinforce_ada.bench.jobs import _record_path

    sent = [portable(j) for j in todo]
    for j, fields in zip(todo, sent, strict=True):  # the worker must write the record the plan looks for
        if _record_path(cache, rebuild(fields), fingerprint, identity) != _record_path(cache, j, fingerprint, identity):
            raise RuntimeError(f"{j.key}: its strategy does not survive being sent to a worker ({fields['strategy']})")

    pairs = list(zip(todo, sent, strict=True))

    def ended() -> Iterator[tuple[Any, Any]]:  # (job, its record or its error), in the order the jobs end
        if workers == 1:  # in this process, as the package's run_jobs does with one worker
            for j, fields in pairs:
                try:
                    yield j, run_one(fields, str(cache), fingerprint, identity)
                except Exception as e:
                    yield j, e
            return
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {ex.submit(run_one, f, str(cache), fingerprint, identity): j for j, f in pairs}
            for f in as_completed(futures):
                yield futures[f], f.exception() or f.result()

    failed: dict[str, str] = {}
    for i, (job, rec) in enumerate(ended(), 1):
        if isinstance(rec, BaseException):  # a package with its own failure handling wraps the error: the inner one
            failed[job.key] = (
                next(iter(rec.failed.values())) if hasattr(rec, "failed") else f"{type(rec).__name__}: {rec}"
            )
            log(f"[{i}/{len(todo)}] FAILED {job.key}; the others go on\n" + "".join(traceback.format_exception(rec)))
            continue
        acc, spent = rec["accuracy"], rec["seconds"]["total"]
        log(f"[{i}/{len(todo)}] {job.key}: acc {acc[0]:.3f} -> {acc[-1]:.3f}, {spent:.0f} s")
    if failed:
        raise RunsFailed(
            f"{len(failed)} of {len(todo)} runs failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
        )


class RunsFailed(RuntimeError):
    """Jobs of a phase raised (each logged with its traceback); every other job's record is kept, and the same
    command runs only the failed ones again."""


def plan_and_run(req: Request, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Plan every phase, run the missing jobs (`req.run`), write and return the plan (module docstring)."""
    import reinforce_ada
    from reinforce_ada.bench.analysis import choose_lrs
    from reinforce_ada.bench.arms import MATCHED_TO, matched_n, resolve_arms
    from reinforce_ada.bench.compare import CompareConfig, _cfg, _git_commit, plan_jobs
    from reinforce_ada.bench.jobs import _read_record, _record_path, code_fingerprint
    from reinforce_ada.bench.testbed import build_pool, check_weights, parse_pool, with_size
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy
    from reinforce_ada.tasks.config import TaskConfig
    from reinforce_ada.training.warm_start import resolve_model_path

    grow_grid = package_function("grow_grid")
    package = Path(reinforce_ada.__file__).resolve().parent
    if req.package and package != Path(req.package).resolve():
        raise RuntimeError(f"the jobs must be run by {req.package}, but reinforce_ada was imported from {package}")
    c = CompareConfig(**{k: _tuples(v) for k, v in req.config.items()})
    cache, plan_path = Path(req.cache), Path(req.plan)
    recorded = {r["id"]: r for r in req.recorded}
    arms, skipped = resolve_arms(list(c.arms))
    task = pools_task(c.pools)
    model_path = str(resolve_model_path(ModelConfig(), TaskConfig(name=task), progress=False))
    model, tok = load_policy(Path(model_path), ModelConfig(path=model_path, threads=c.threads))
    tb = check_weights(model_path, model, tok, **({"task": task} if task != "arithmetic" else {}))
    pools = []
    for spec in map(parse_pool, c.pools):
        pools.append(
            build_pool(with_size(spec, c.pool_size) if c.pool_size else spec, model, tok, Path(c.run_root) / "pools")
        )
    fingerprint = code_fingerprint()
    identity = {p.spec.name: f"{tb['sha256']}:{p.digest}" for p in pools}
    plan: dict[str, Any] = {
        "package": str(package),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "arms": {a.name: a.spec for a in arms},
        "skipped_arms": skipped,
        "code_fingerprint": fingerprint,
        "git_commit": _git_commit(),
        "testbed": tb,
        "pools": {
            p.spec.name: {
                "spec": p.spec.spec,
                "digest": p.digest,
                "level_weights": p.level_weights,
                "matched_n": matched_n(_cfg(arms, MATCHED_TO), p.train_rates),
                **p.stats,
            }
            for p in pools
        },
        **{phase: [] for phase in PHASES},
        "lr_sweep": {},
        "lrs_by_pool": {},
        "final": False,
        "ran": dict.fromkeys(PHASES, 0),
    }

    def entries(jobs: list[Any]) -> list[dict[str, Any]]:
        paths = [_record_path(cache, j, fingerprint, identity) for j in jobs]
        return [entry(j, p.name.removesuffix(".json.gz")) for j, p in zip(jobs, paths, strict=True)]

    def have(run_id: str) -> bool:
        return run_id in recorded or (cache / f"{run_id}.json.gz").exists()

    def go(phase: str, jobs: list[Any], planned: list[dict[str, Any]]) -> None:
        plan[phase] = planned
        _write_json(plan_path, plan)
        todo = [
            j
            for j, e in zip(jobs, planned, strict=True)
            if not have(e["id"]) and (req.run_pools is None or j.pool in req.run_pools)
        ]
        log(
            f"{phase}: {len(planned)} jobs planned, {len(planned) - len(todo)} finished or skipped, {len(todo)} to run"
            + ("" if req.run else " (plan only: none is run)")
        )
        if req.run and todo:
            run_each(todo, c.workers, log, cache, fingerprint, identity)
            plan["ran"][phase] += len(todo)

    def curve(e: dict[str, Any]) -> dict[str, Any]:
        r = recorded.get(e["id"]) or _read_record(cache / f"{e['id']}.json.gz")
        return {k: r[k] for k in CURVE}

    fixed = dict(c.fixed_lrs)
    sweep_arms = [a for a in arms if a.name not in fixed]
    on = pools if c.sweep_each_pool else pools[:1]
    grids = {p.spec.name: {a.name: tuple(c.lrs) for a in sweep_arms} for p in on} if sweep_arms else {}
    choice: dict[str, dict[str, Any]] = {}
    for round_ in range(c.extend_sweep + 1):  # `bench.compare._sweep`, its runs from the records where they exist
        if not grids:
            break
        jobs = plan_jobs(c, sweep_arms, on, model_path, None, grids)
        planned = entries(jobs)
        check(planned, recorded, final=False)
        go("sweep", jobs, planned)
        runs = [curve(e) for e in planned if have(e["id"])]
        choice = {p: choose_lrs([r for r in runs if r["pool"] == p], c.steps) for p in grids}
        grids, grown = grow_grid(grids, choice, may_grow=round_ < c.extend_sweep)
        if not grown:
            break
        log("lr sweep: best at the grid's edge, extending " + ", ".join(grown))
    first = pools[0].spec.name
    lrs = {
        p.spec.name: {
            a.name: fixed.get(a.name, choice.get(p.spec.name, choice.get(first, {})).get(a.name, {}).get("best"))
            for a in arms
        }
        for p in pools
    }
    plan["lr_sweep"] = {"by_pool": choice, "fixed": fixed, "seeds": c.sweep_seeds}
    plan["lrs_by_pool"] = lrs
    jobs = plan_jobs(c, arms, pools, model_path, lrs)
    planned = entries(jobs)
    check([*plan["sweep"], *planned], recorded, final=True)
    plan["final"] = True
    go("main", jobs, planned)
    _write_json(plan_path, plan)
    return plan


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m studies.protocol.jobrunner REQUEST.json", file=sys.stderr)
        return 2
    try:
        fields = json.loads(Path(argv[0]).read_text())
        req = Request(**{f.name: fields[f.name] for f in dataclasses.fields(Request) if f.name in fields})
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as e:
        print(f"error: request {argv[0]}: not a readable request ({e}); start the session again", file=sys.stderr)
        return 2
    from reinforce_ada.errors import ConfigError  # the package's, whichever commit runs the jobs

    try:
        plan_and_run(req, lambda m: print(m, flush=True))
    except StudyChanged as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return CHANGED
    except (ConfigError, RunsFailed) as e:  # e.g. a raw record it cannot read: the message names it and what to do
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
