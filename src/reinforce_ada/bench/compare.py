"""Side-by-side convergence benchmark on the embedded testbed (`reinforce-ada compare`).

1) Testbed: the shipped warm start (the same weights on every machine; their sha256 and exact per-level pass rates
   are checked against the shipped record and written into the result) and one or more pools (`bench.testbed`):
   today's level mix and one shaped like the paper's hard set by the difficulty filter.
2) Arms are `parse_arm` specs (`bench.arms`); arms that do not parse yet are skipped with their reason.
3) Learning rate: a sweep over `lrs` on the first pool with `sweep_seeds` seeds of their own (numbered from 1000,
   never reused by the main runs, so the choice does not flatter the reported seeds); each arm then runs at the lr
   with the largest curve area. `fixed_lrs` skips the sweep for the arms it names.
4) Main runs: every arm on every pool, `seeds` seeds for the headline arms (`bench.arms.HEADLINE`) and `other_seeds`
   for the rest,
   odd so medians are runs; the reference GRPO-n4 runs `ref_steps_factor` times longer, so a faster arm's accuracy
   range is covered by the reference's rising part. Jobs are interleaved seed by seed (and run in `workers`
   processes), each evaluated exactly every `eval_every` steps (`bench.run`).
5) Statistics (`bench.analysis`, `bench.curves`): per-seed time-scale factors against the same seed's reference,
   geometric means with 90% seed-bootstrap intervals; curve-area ratios; steps/tokens to targets fixed in advance;
   compute to target against the best uniform arm (`bench.compute`), with `compute_arm`'s headline figures.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reinforce_ada.bench import analysis, compute, equal_tokens, testbed
from reinforce_ada.bench.arms import (
    ARMS,
    HEADLINE,
    MATCHED,
    MATCHED_TO,
    ORACLES,
    PER_PROMPT_BUDGET,
    REFERENCE,
    UNIFORM,
    Arm,
    check_costs,
    matched_n,
    resolve_arms,
)
from reinforce_ada.bench.jobs import RecordHook, code_fingerprint, record_schema, run_jobs
from reinforce_ada.bench.run import Job
from reinforce_ada.bench.testbed import BUILTIN_POOLS, Pool, build_pool, check_weights, parse_pool, with_size
from reinforce_ada.errors import ConfigError

SWEEP_SEED_BASE = 1000
QUICK: dict[str, Any] = {
    "steps": 12,
    "eval_every": 4,
    "seeds": 3,
    "other_seeds": 3,
    "sweep_seeds": 1,
    "pool_size": 512,
    "check_samples": 2,
}
"""`--quick`: every arm and pool, a few minutes; odd seed counts, so every median is a run."""


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    arms: tuple[str, ...] = tuple(ARMS)
    """Arm names from `bench.arms.ARMS`, or NAME=SPEC."""
    pools: tuple[str, ...] = tuple(p for p in BUILTIN_POOLS if p not in testbed.LONG_POOLS)
    """Pool specs (`bench.testbed.parse_pool`); the lr sweep runs on the first."""
    steps: int = 200
    """RL steps per run (the reference runs `ref_steps_factor` times as many)."""
    ref_steps_factor: float = 2.0
    batch_size: int = 16
    """Prompts per step."""
    lrs: tuple[float, ...] = (1e-4, 2e-4, 4e-4)
    """The lr sweep's grid (each arm is reported at its best, the sweep beside it). A pilot on the default pool
    (batch 16, 200 steps) had GRPO-n4 and Seq-balanced degrade at 5e-4 and collapse at 1e-3 and 2e-3."""
    fixed_lrs: tuple[tuple[str, float], ...] = ()
    """(arm, lr) pairs that skip the sweep (e.g. a re-run with another run's choices)."""
    sweep_seeds: int = 2
    seeds: int = 9
    """Seeds of the headline arms (GRPO-n4, Seq-balanced, budget-matched GRPO)."""
    other_seeds: int = 5
    seed_offset: int = 0
    """First main seed: a second, independent run uses other seeds."""
    eval_every: int = 10
    token_budget: int | None = None
    """Run every arm to this many generated tokens (its prior pass included) instead of a step count; `steps` is then a
    cap, and runs are evaluated every `token_budget / eval_points` tokens: arms of different samples per step end at
    the same cost (`bench.compute.equal_tokens`)."""
    eval_points: int = 20
    """With `token_budget`: evaluations per run after the start."""
    value_errors: bool = False
    """Log every step's baseline errors against the exact pass rates (`bench.run.value_probe`)."""
    threads: int = 1
    """torch threads per run (1: tiny tensors, and threads fight on a shared machine)."""
    workers: int = 1
    """Runs at a time, in worker processes (results do not depend on it; step times do)."""
    check_samples: int = 4
    """Samples per held-out prompt in each run's end-of-run sampled check of the exact evaluation (0: off)."""
    pool_size: int | None = None
    """Cap every pool at this many prompts (quick runs)."""
    sweep_each_pool: bool = False
    """Sweep the lr on every pool (each arm's lr per pool), not only on the first."""
    extend_sweep: int = 0
    """Times an arm's grid may grow by one lr (x2 above or /2 below) while its best lr sits at the grid's edge."""
    long_arms: tuple[str, ...] = (REFERENCE,)
    """Arms that run `ref_steps_factor` times longer (the references: the uniform family in a compute run)."""
    uniform: tuple[str, ...] = UNIFORM
    """The uniform family the best uniform arm is chosen from (`bench.compute`); those run are used."""
    oracles: tuple[str, ...] = ORACLES
    """Oracle arms (`estimator=oracle`): the ceiling of `bench.compute`, never a headline arm."""
    records: str | None = None
    """Where finished runs are kept for reuse (default RUN_ROOT/records); a committed folder lets a long benchmark
    resume in another session on another machine."""
    only_cached: bool = False
    """Run nothing: report on the runs the records folder already holds (a long run still going, or stopped)."""
    fingerprint_of: str | None = None
    """Key the records by the code of this package folder instead of the running one (a report on runs made by
    another copy of the package, e.g. a frozen worktree of another commit: `.../src/reinforce_ada`)."""
    compute_arm: str = "mopps"
    """The adaptive arm whose compute-to-target figures are the headline (`bench.compute.headline`)."""
    out: str = "runs/compare/convergence"
    """Where OUT.json and OUT.png go."""
    run_root: str = "runs/compare"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "sweep_seeds", "seeds", "other_seeds", "eval_every", "threads", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"compare: {name}={getattr(self, name)} must be >= 1")
        bad = [
            lr
            for lr in (*self.lrs, *(v for _, v in self.fixed_lrs))
            if not (isinstance(lr, int | float) and 0 < lr < 1)
        ]
        if self.ref_steps_factor < 1 or not self.lrs or bad:
            raise ConfigError(
                f"compare: ref_steps_factor must be >= 1 and every lr a number in (0, 1] (as optim.lr); got {bad}"
            )
        if not self.pools:
            raise ConfigError("compare: give at least one pool")
        if self.extend_sweep < 0:
            raise ConfigError(f"compare: extend_sweep={self.extend_sweep} must be >= 0")
        if REFERENCE not in self.uniform:
            raise ConfigError(f"compare: the uniform family {list(self.uniform)} must include {REFERENCE!r}")
        if self.token_budget is not None and (self.token_budget < 1 or self.eval_points < 1):
            raise ConfigError(
                f"compare: token_budget={self.token_budget} and eval_points={self.eval_points} must be >= 1"
            )


def plan_jobs(
    c: CompareConfig,
    arms: list[Arm],
    pools: list[Pool],
    model_path: str,
    lrs: dict[str, dict[str, float]] | None,
    grids: dict[str, dict[str, tuple[float, ...]]] | None = None,
) -> list[Job]:
    """The sweep's jobs (`grids`: pool -> arm -> lrs to run) or the main runs' (`lrs`: pool -> arm -> its lr),
    interleaved seed by seed, so a run cut short leaves every arm with the same first seeds."""
    matched = {p.spec.name: matched_n(_cfg(arms, MATCHED_TO), p.train_rates)[0] for p in pools}
    jobs = []
    sweeping = lrs is None
    for pool in pools:
        if sweeping and (grids is None or pool.spec.name not in grids):
            continue
        n_seeds = c.sweep_seeds if sweeping else max(c.seeds, c.other_seeds)
        for i in range(n_seeds):
            for arm in arms:
                if sweeping:
                    assert grids is not None
                    grid, seed, phase = (
                        grids[pool.spec.name].get(arm.name, ()),
                        SWEEP_SEED_BASE + c.seed_offset + i,
                        "sweep",
                    )
                else:
                    assert lrs is not None
                    if i >= (c.seeds if arm.name in HEADLINE else c.other_seeds):
                        continue
                    if lrs[pool.spec.name].get(arm.name) is None:  # a report on a sweep that has not run this arm
                        continue
                    grid, seed, phase = (lrs[pool.spec.name][arm.name],), c.seed_offset + i, "main"
                long = arm.name in c.long_arms and c.token_budget is None  # a token budget ends every arm alike
                steps = round(c.steps * c.ref_steps_factor) if long else c.steps
                cfg = arm.cfg.replace(n=matched[pool.spec.name]) if arm.name == MATCHED else arm.cfg
                if arm.name in PER_PROMPT_BUDGET and cfg.options.budget is None:
                    cfg = cfg.replace(budget=PER_PROMPT_BUDGET[arm.name] * c.batch_size)
                for lr in grid:
                    jobs.append(
                        Job(
                            pool=pool.spec.name,
                            arm=arm.name,
                            strategy=cfg,
                            lr=lr,
                            seed=seed,
                            steps=steps,
                            batch_size=c.batch_size,
                            eval_every=c.eval_every,
                            model_path=model_path,
                            train_path=pool.train_path,
                            eval_path=pool.eval_path,
                            level_weights=pool.level_weights,
                            run_dir=str(
                                Path(c.run_root) / "runs" / phase / pool.spec.name / arm.name / f"lr{lr:g}-s{seed}"
                            ),
                            threads=c.threads,
                            max_new_tokens=testbed.pool_max_new_tokens(pool.spec),
                            check_samples=c.check_samples if phase == "main" else 0,
                            phase=phase,
                            train=arm.train,
                            max_tokens=c.token_budget,
                            eval_every_tokens=-(-c.token_budget // c.eval_points) if c.token_budget else None,
                            value_errors=c.value_errors,
                        )
                    )
    return jobs


def _cfg(arms: list[Arm], name: str) -> Any:
    from reinforce_ada.sampling.configure import parse_arm

    return next((a.cfg for a in arms if a.name == name), None) or parse_arm(ARMS[name])


def run_compare(
    c: CompareConfig, log: Callable[[str], None] = print, carry: RecordHook | None = None
) -> dict[str, Any]:
    """Run (or, with `only_cached`, report on) a comparison. `carry`: a hook that may put records in place before
    each lookup (`bench.jobs.RecordHook`; it is told the pools' identity once they are built)."""
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy
    from reinforce_ada.tasks.config import TaskConfig
    from reinforce_ada.training.warm_start import resolve_model_path

    t_start = time.perf_counter()
    arms, skipped = resolve_arms(list(c.arms))
    task = testbed.pools_task(c.pools)  # arithmetic, or running_sums for long-answer pools (never both)
    check_costs(arms, c, max(testbed.pool_max_new_tokens(parse_pool(p)) for p in c.pools))  # before any pool is built
    fingerprint = code_fingerprint(c.fingerprint_of)
    schema = record_schema(c.fingerprint_of) if c.fingerprint_of else None
    cache = Path(c.records) if c.records else Path(c.run_root) / "records"
    for name, why in skipped.items():
        log(f"arm {name!r} skipped: its spec {ARMS.get(name, '')!r} does not parse yet ({why})")
    model_path = str(resolve_model_path(ModelConfig(), TaskConfig(name=task), progress=False))
    model, tok = load_policy(Path(model_path), ModelConfig(path=model_path, threads=c.threads))
    results: dict[str, Any] = {"config": dataclasses.asdict(c), "date": datetime.date.today().isoformat()}
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    results["arms"] = {a.name: a.spec for a in arms}
    results["code_fingerprint"] = fingerprint
    results["git_commit"] = _git_commit()
    results["skipped_arms"] = skipped
    tb = results["testbed"] = check_weights(model_path, model, tok, task=task)
    log(
        f"testbed {tb['sha256'][:12]}: "
        + ("the shipped warm start" if tb["matches"] else "NOT the shipped warm start: results are not comparable")
        + " | exact pass rates "
        + " ".join(f"L{k}={v:.3f}" for k, v in tb["exact_pass_rates"].items())
    )
    pools = []
    for spec in map(parse_pool, c.pools):
        spec = with_size(spec, c.pool_size) if c.pool_size else spec
        pools.append(build_pool(spec, model, tok, Path(c.run_root) / "pools"))
        s = pools[-1].stats
        log(
            f"pool {spec.name}: {s['prompts']} prompts ({s['held_out_prompts']} held out), mean p {s['mean']:.3f}, "
            f"{s['share_below_0.2']:.0%} below 0.2, {s['share_below_0.02']:.0%} below 0.02"
        )
    results["pools"] = {
        p.spec.name: {
            "spec": p.spec.spec,
            "digest": p.digest,
            "level_weights": p.level_weights,
            "matched_n": matched_n(_cfg(arms, MATCHED_TO), p.train_rates),
            **p.stats,
        }
        for p in pools
    }
    identity = {p.spec.name: f"{tb['sha256']}:{p.digest}" for p in pools}
    if carry is not None:
        carry.set_identity(identity)
    fixed = dict(c.fixed_lrs)
    sweep, choice = _sweep(
        c, [a for a in arms if a.name not in fixed], pools, model_path, log, cache, fingerprint, identity, schema, carry
    )
    first = pools[0].spec.name
    lrs = {
        p.spec.name: {
            a.name: fixed.get(a.name, choice.get(p.spec.name, choice.get(first, {})).get(a.name, {}).get("best"))
            for a in arms
        }
        for p in pools
    }
    results["lr_sweep"] = {
        "pool": first,
        "pools": sorted(choice),
        "seeds": c.sweep_seeds,
        "arms": choice.get(first, {}),
        "by_pool": choice,
        "fixed": fixed,
    }
    results["lrs"], results["lrs_by_pool"] = lrs[first], lrs
    for p in pools:
        chosen = ", ".join(
            f"{k} {v:g}" if v is not None else f"{k} (no sweep run yet)" for k, v in lrs[p.spec.name].items()
        )
        log(f"learning rates on {p.spec.name}: {chosen}")
    main = run_jobs(
        plan_jobs(c, arms, pools, model_path, lrs),
        c.workers,
        log,
        cache,
        fingerprint,
        identity,
        c.only_cached,
        schema,
        carry,
    )
    spec_of = {a.name: a.spec for a in arms}
    for r in (*sweep, *main):
        r["spec"] = spec_of[r["arm"]]
    results["runs"] = {"sweep": sweep, "main": main}
    results["by_pool"] = {}
    results["missing"] = {}
    for p in pools:
        recs = [r for r in main if r["pool"] == p.spec.name]
        if not any(r["arm"] == REFERENCE for r in recs):  # only in a report on a run not finished yet
            results["missing"][p.spec.name] = f"no {REFERENCE} run has finished on this pool yet"
            continue
        summ = analysis.summarize_pool(recs, REFERENCE, MATCHED if MATCHED in spec_of else None, c.steps)
        sw = [r for r in sweep if r["pool"] == p.spec.name]
        summ["compute"] = compute.summarize(recs, sw, c.uniform, c.oracles)
        if c.token_budget:  # runs short of the budget (checked up front) are reported, not a raw error
            try:
                summ["equal_tokens"] = equal_tokens.table(recs, c.uniform, c.token_budget)
            except ValueError as e:
                summ["equal_tokens"] = {"error": str(e)}
        results["by_pool"][p.spec.name] = summ
    if not results["by_pool"]:
        raise ConfigError(f"nothing to report yet: {results['missing']} (records in {cache})")
    results["compute"] = {
        "arm": c.compute_arm,
        "targets": list(compute.TARGETS),
        "by_pool": {p: compute.headline(s["compute"], c.compute_arm) for p, s in results["by_pool"].items()},
        "best_after_the_fact": {
            p: compute.best_after_the_fact(s["compute"], (*c.uniform, *c.oracles))
            for p, s in results["by_pool"].items()
        },
    }
    results["seconds"] = time.perf_counter() - t_start
    return results


def _sweep(
    c: CompareConfig,
    arms: list[Arm],
    pools: list[Pool],
    model_path: str,
    log: Callable[[str], None],
    cache: Path,
    fingerprint: str,
    identity: dict[str, str],
    schema: dict[str, Any] | None = None,
    carry: RecordHook | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The lr sweep (on every pool or the first) and each arm's choice per pool; an arm whose best lr sits at its
    grid's edge gets one more lr beyond it, up to `extend_sweep` times (earlier runs come from the records)."""
    if not arms:
        return [], {}
    on = pools if c.sweep_each_pool else pools[:1]
    grids = {p.spec.name: {a.name: tuple(c.lrs) for a in arms} for p in on}
    log(f"lr sweep on {[p.spec.name for p in on]}: {len(arms)} arms x lrs {list(c.lrs)} x {c.sweep_seeds} seeds")
    for round_ in range(c.extend_sweep + 1):
        jobs = plan_jobs(c, arms, on, model_path, None, grids)
        sweep = run_jobs(jobs, c.workers, log, cache, fingerprint, identity, c.only_cached, schema, carry)
        choice = {p: analysis.choose_lrs([r for r in sweep if r["pool"] == p], c.steps) for p in grids}
        grids, grown = analysis.grow_grid(grids, choice, may_grow=round_ < c.extend_sweep)
        if not grown:
            break
        log("lr sweep: best at the grid's edge, extending " + ", ".join(grown))
    return sweep, choice


def _git_commit() -> str | None:
    """HEAD of the checkout the package runs from, if it is one (a record of which code made a result)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):  # no git here: the fingerprint still names the code
        return None
    return out.stdout.strip() or None
