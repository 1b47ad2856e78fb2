"""Side-by-side convergence benchmark on the embedded testbed (`reinforce-ada compare`, benchmarks/convergence.py).

1) Testbed: the shipped warm start (the same weights on every machine; their sha256 and exact per-level pass rates
   are checked against the shipped record and written into the result) and one or more pools (`bench.testbed`):
   today's level mix and one shaped like the paper's hard set by the difficulty filter.
2) Arms are `parse_arm` specs (`bench.arms`); arms that do not parse yet are skipped with their reason.
3) Learning rate: a sweep over `lrs` on the first pool with `sweep_seeds` seeds of their own (numbered from 1000,
   never reused by the main runs, so the choice does not flatter the reported seeds); each arm then runs at the lr
   with the largest curve area. `fixed_lrs` skips the sweep for the arms it names.
4) Main runs: every arm on every pool, `seeds` seeds for the headline arms (P1-P3) and `other_seeds` for the rest,
   odd so medians are runs; the reference GRPO-n4 runs `ref_steps_factor` times longer, so a faster arm's accuracy
   range is covered by the reference's rising part. Jobs are interleaved seed by seed (and run in `workers`
   processes), each evaluated exactly every `eval_every` steps (`bench.run`).
5) Statistics (`bench.analysis`, `bench.curves`): per-seed time-scale factors against the same seed's reference,
   geometric means with 90% seed-bootstrap intervals; curve-area ratios; steps/tokens to targets fixed in advance.
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

from reinforce_ada.bench import analysis
from reinforce_ada.bench.arms import ARMS, HEADLINE, MATCHED, MATCHED_TO, REFERENCE, Arm, matched_n, resolve_arms
from reinforce_ada.bench.run import Job, run_job
from reinforce_ada.bench.testbed import BUILTIN_POOLS, Pool, build_pool, check_weights, parse_pool, with_size
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.strategies import strategy_class

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
    pools: tuple[str, ...] = tuple(BUILTIN_POOLS)
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
    threads: int = 1
    """torch threads per run (1: tiny tensors, and threads fight on a shared machine)."""
    workers: int = 1
    """Runs at a time, in worker processes (results do not depend on it; step times do)."""
    check_samples: int = 4
    """Samples per held-out prompt in each run's end-of-run sampled check of the exact evaluation (0: off)."""
    p2_arm: str = MATCHED_TO
    """The adaptive arm P2 reads against budget-matched GRPO, named before the run."""
    pool_size: int | None = None
    """Cap every pool at this many prompts (quick runs)."""
    out: str = "runs/compare/convergence"
    """Where OUT.json and OUT.png go (the user's choice; this repository's benchmarks/convergence.py writes its
    committed results under benchmarks/results/)."""
    run_root: str = "runs/compare"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "sweep_seeds", "seeds", "other_seeds", "eval_every", "threads", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"compare: {name}={getattr(self, name)} must be >= 1")
        if self.ref_steps_factor < 1 or not self.lrs or any(lr <= 0 for lr in self.lrs):
            raise ConfigError("compare: ref_steps_factor must be >= 1 and lrs positive")
        if not self.pools:
            raise ConfigError("compare: give at least one pool")


def plan_jobs(
    c: CompareConfig, arms: list[Arm], pools: list[Pool], model_path: str, lrs: dict[str, float] | None
) -> list[Job]:
    """The sweep's jobs (lrs None) or the main runs' (each arm at its lr), interleaved seed by seed."""
    matched = {p.spec.name: matched_n(_cfg(arms, MATCHED_TO), p.train_rates)[0] for p in pools}
    jobs = []
    for pool in pools if lrs is not None else pools[:1]:
        n_seeds = max(c.seeds, c.other_seeds) if lrs is not None else c.sweep_seeds
        for i in range(n_seeds):
            for arm in arms:
                if lrs is None:
                    grid, seed, phase, steps = c.lrs, SWEEP_SEED_BASE + c.seed_offset + i, "sweep", c.steps
                else:
                    if i >= (c.seeds if arm.name in HEADLINE else c.other_seeds):
                        continue
                    grid, seed, phase = (lrs[arm.name],), c.seed_offset + i, "main"
                    steps = round(c.steps * c.ref_steps_factor) if arm.name == REFERENCE else c.steps
                cfg = arm.cfg.replace(n=matched[pool.spec.name]) if arm.name == MATCHED else arm.cfg
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
                            check_samples=c.check_samples if phase == "main" else 0,
                            phase=phase,
                        )
                    )
    return jobs


def _cfg(arms: list[Arm], name: str) -> Any:
    from reinforce_ada.sampling.config import parse_arm

    return next((a.cfg for a in arms if a.name == name), None) or parse_arm(ARMS[name])


def code_fingerprint() -> str:
    """sha256 of the package's source (every .py file, committed or not): a run's records are reused only by the
    same code."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _record_path(cache: Path, job: Job, fingerprint: str) -> Path:
    import hashlib
    import json

    fields = {k: v for k, v in dataclasses.asdict(job).items() if k != "run_dir"}
    key = json.dumps([fingerprint, fields], sort_keys=True, default=str)
    return cache / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def run_jobs(
    jobs: list[Job], workers: int, log: Callable[[str], None], cache: Path | None = None, fingerprint: str = ""
) -> list[dict[str, Any]]:
    """Run every job (in `workers` spawned processes when > 1); results in job order, progress with an ETA.

    With `cache`, each finished run's record is kept under a hash of the job and the code, and a later call reuses
    it: a crashed run resumes, and adding an arm re-runs only that arm's jobs (runs are deterministic).
    """
    import json

    t0, done, out = time.perf_counter(), 0, {}
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        for j in jobs:
            f = _record_path(cache, j, fingerprint)
            if f.exists():
                out[j.key] = json.loads(f.read_text())
        if out:
            log(f"reusing {len(out)} of {len(jobs)} runs from {cache}")
    todo = [j for j in jobs if j.key not in out]
    weight = {j.key: j.steps * strategy_class(j.strategy.name).cost_hint(j.strategy) for j in todo}
    total = sum(weight.values())
    spent = 0
    by_key = {j.key: j for j in todo}

    def report(rec: dict[str, Any]) -> None:
        nonlocal done, spent
        done += 1
        spent += weight[rec["key"]]
        if cache is not None:
            f = _record_path(cache, by_key[rec["key"]], fingerprint)
            tmp = f.with_name(f".{f.name}.tmp")
            tmp.write_text(json.dumps(rec))
            tmp.replace(f)
        el = time.perf_counter() - t0
        eta = el * (total - spent) / max(spent, 1)
        log(
            f"[{done}/{len(todo)}] {rec['key']}: acc {rec['accuracy'][0]:.3f} -> {rec['accuracy'][-1]:.3f}, "
            f"{sum(rec['samples_per_step']) / rec['steps']:.0f} samples/step, {rec['seconds']['total']:.0f} s "
            f"(elapsed {el / 60:.1f} min, ETA {eta / 60:.1f} min)"
        )

    if workers == 1:
        for j in todo:
            out[j.key] = run_job(j)
            report(out[j.key])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            futures = {ex.submit(run_job, j): j for j in todo}
            for f in as_completed(futures):
                rec = f.result()
                out[rec["key"]] = rec
                report(rec)
    return [out[j.key] for j in jobs]


def run_compare(c: CompareConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy
    from reinforce_ada.tasks.config import TaskConfig
    from reinforce_ada.training.warm_start import resolve_model_path

    t_start = time.perf_counter()
    arms, skipped = resolve_arms(list(c.arms))
    fingerprint = code_fingerprint()
    cache = Path(c.run_root) / "records"
    for name, why in skipped.items():
        log(f"arm {name!r} skipped: its spec {ARMS.get(name, '')!r} does not parse yet ({why})")
    model_path = str(resolve_model_path(ModelConfig(), TaskConfig(), progress=False))
    model, tok = load_policy(Path(model_path), ModelConfig(path=model_path, threads=c.threads))
    results: dict[str, Any] = {"config": dataclasses.asdict(c), "date": datetime.date.today().isoformat()}
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    results["arms"] = {a.name: a.spec for a in arms}
    results["code_fingerprint"] = fingerprint
    results["git_commit"] = _git_commit()
    results["skipped_arms"] = skipped
    tb = results["testbed"] = check_weights(model_path, model, tok)
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
    fixed = dict(c.fixed_lrs)
    sweep_arms = [a for a in arms if a.name not in fixed]
    sweep: list[dict[str, Any]] = []
    if sweep_arms:
        log(
            f"lr sweep on pool {pools[0].spec.name}: {len(sweep_arms)} arms x lrs {list(c.lrs)} x {c.sweep_seeds} seeds"
        )
        sweep = run_jobs(plan_jobs(c, sweep_arms, pools, model_path, None), c.workers, log, cache, fingerprint)
    choice = analysis.choose_lrs(sweep, c.steps)
    lrs = {a.name: fixed.get(a.name, choice.get(a.name, {}).get("best")) for a in arms}
    results["lr_sweep"] = {"pool": pools[0].spec.name, "seeds": c.sweep_seeds, "arms": choice, "fixed": fixed}
    results["lrs"] = lrs
    log("learning rates: " + ", ".join(f"{k} {v:g}" for k, v in lrs.items()))
    main = run_jobs(plan_jobs(c, arms, pools, model_path, lrs), c.workers, log, cache, fingerprint)
    spec_of = {a.name: a.spec for a in arms}
    for r in (*sweep, *main):
        r["spec"] = spec_of[r["arm"]]
    results["runs"] = {"sweep": sweep, "main": main}
    results["by_pool"] = {}
    for p in pools:
        recs = [r for r in main if r["pool"] == p.spec.name]
        summ = analysis.summarize_pool(recs, REFERENCE, MATCHED if MATCHED in lrs else None, c.steps)
        summ["goals"] = analysis.goals(recs, summ, REFERENCE, MATCHED, c.p2_arm, c.steps)
        results["by_pool"][p.spec.name] = summ
    results["goals"] = goals_for_summary(results, pools[0].spec.name)
    results["seconds"] = time.perf_counter() - t_start
    return results


def goals_for_summary(results: dict[str, Any], pool: str) -> dict[str, Any]:
    """summary.json's P-entries: the first pool's figures, every other pool's beside them, the testbed named."""
    first = results["by_pool"][pool]["goals"]
    tb = results["testbed"]
    out = {}
    for key, g in first.items():
        entry = {**{k: v for k, v in g.items() if k != "per_seed"}, "pool": pool}
        entry["testbed_sha256"] = tb["sha256"]
        entry["testbed_is_shipped"] = tb["matches"]
        entry["testbed_exact_pass_rates"] = tb["exact_pass_rates"]
        for other, s in results["by_pool"].items():
            if other != pool:
                og = s["goals"][key]
                entry[f"pool_{other}"] = {k: og.get(k) for k in ("value", "lo", "hi")}
        out[key] = entry
    return out


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
