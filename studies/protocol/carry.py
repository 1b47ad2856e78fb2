"""Carrying finished runs from one code commit to another, after a same-seed check.

A benchmark's records are keyed by the code that made them (`bench.jobs.code_fingerprint`), so a second
registration at a newer commit (e.g. the allocator registrations of the compute-to-target study, which compare new
arms with the uniform family its first registration ran) would run every shared arm again. `Carrier` lets the newer
run reuse the older commit's records of the arms it names, under one condition that is checked rather than assumed:
for each such arm and pool, the runs of the `check_seeds` (main phase) are *not* carried but run again by the new
code, and `verify` compares them value by value
with the old commit's records of the same jobs: every field both records have (timings aside; a metric only one
commit writes, e.g. a share of a feature the arm does not use, is listed, not compared), and the learning curve and
samples must be among them. Runs are deterministic, so equal records mean the code path that arm takes did not
change; an arm whose check differs (or has not run yet) must have its carried records removed (`Carrier.uncarry`)
and be run by the new code.

What is not the same: the carried records keep the step times of the session that made them, so wall-clock (C2)
between a carried arm and a new one is not interleaved. `verify` reports each check's time ratio (new / old on the
same job), which says how far the two sessions' loads differed.

The hook is called by `bench.jobs.run_jobs` for every job it looks up, with the path the new code keys the job's
record under; it copies the old record there (marked `carried_from`) when that file is missing and the job may be
carried.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from reinforce_ada.bench.jobs import _read_record, _record_path, _write_record, code_fingerprint, record_schema
from reinforce_ada.bench.run import Job
from reinforce_ada.errors import ConfigError

UNCOMPARED = ("time_step_s", "time_generate_s", "time_train_s", "seconds", "load", "cpu", "carried_from")
"""Record fields a same-seed check ignores: the session's timings and machine, and the carry mark itself."""
TRAJECTORY = ("accuracy", "samples_per_step")
"""Fields both records must have: the run's learning curve and what it spent (a check comparing less is no check)."""


def _canonical(value: Any) -> str:
    """JSON text of a field (NaN reads as NaN on both sides, so an all-NaN series compares equal to itself)."""
    import json

    return json.dumps(value, sort_keys=True)


@dataclasses.dataclass(frozen=True)
class Carry:
    """Which runs another commit's records may stand in for (a pre-registration's `[carry]` table)."""

    package: str
    """The other commit's package folder (`.../src/reinforce_ada`, e.g. a frozen worktree)."""
    arms: tuple[str, ...]
    """Arms whose records may be carried."""
    check_seeds: tuple[int, ...] = (0,)
    """Main-phase seeds never carried: run again by the new code and compared with the old records."""

    def __post_init__(self) -> None:
        if not self.arms:
            raise ConfigError("carry: name at least one arm whose records may be carried")
        if not self.check_seeds:
            raise ConfigError("carry: check_seeds must name at least one seed (the same-seed check is not optional)")


@dataclasses.dataclass
class Check:
    """One same-seed check: the old commit's record of a job and the new commit's run of it."""

    key: str
    pool: str
    arm: str
    old: Path
    new: Path


class Carrier:
    """The `run_jobs` hook: copies eligible old records into place and collects the checks (see the module)."""

    def __init__(self, carry: Carry, cache: Path, identity: dict[str, str] | None = None) -> None:
        self.carry, self.cache, self.identity = carry, Path(cache), identity
        self.fingerprint = code_fingerprint(carry.package)
        self.schema = record_schema(carry.package)
        self.checks: dict[str, Check] = {}
        self.carried: dict[tuple[str, str], list[Path]] = {}
        self.copied = 0

    def set_identity(self, identity: dict[str, str]) -> None:
        """The pools' digests (known only once `run_compare` has built the pools)."""
        self.identity = identity

    def __call__(self, job: Job, dst: Path) -> None:
        if job.arm not in self.carry.arms:
            return
        src = _record_path(self.cache, job, self.fingerprint, self.identity, self.schema)
        if src is None or src == dst:
            return
        if job.phase == "main" and job.seed in self.carry.check_seeds:
            self.checks[job.key] = Check(job.key, job.pool, job.arm, src, dst)
            return
        if dst.exists():
            if _read_record(dst).get("carried_from"):
                self.carried.setdefault((job.pool, job.arm), []).append(dst)
            return
        if src.exists():
            _write_record(dst, {**_read_record(src), "carried_from": self.fingerprint[:12]})
            self.carried.setdefault((job.pool, job.arm), []).append(dst)
            self.copied += 1

    def verify(self) -> dict[str, Any]:
        """Every check collected so far: `same`, `differs` (with the first differing field), or `not run`."""
        out: dict[str, Any] = {}
        for key, ch in sorted(self.checks.items()):
            if not ch.old.exists():
                out[key] = {"pool": ch.pool, "arm": ch.arm, "status": "no old record"}
                continue
            if not ch.new.exists():
                out[key] = {"pool": ch.pool, "arm": ch.arm, "status": "not run"}
                continue
            old, new = _read_record(ch.old), _read_record(ch.new)
            common = sorted((set(old) & set(new)) - set(UNCOMPARED))
            differ = [f for f in common if _canonical(old[f]) != _canonical(new[f])]
            if not set(TRAJECTORY) <= set(common):
                differ.append(
                    "(a trajectory field is missing: " + ", ".join(sorted(set(TRAJECTORY) - set(common))) + ")"
                )
            ratio = new["seconds"]["total"] / old["seconds"]["total"] if old["seconds"]["total"] else None
            out[key] = {
                "pool": ch.pool,
                "arm": ch.arm,
                "status": "differs" if differ else "same",
                **({"differs_in": differ} if differ else {}),
                "compared": len(common),
                "only_old": sorted(set(old) - set(new) - set(UNCOMPARED)),
                "only_new": sorted(set(new) - set(old) - set(UNCOMPARED)),
                "time_ratio_new_over_old": ratio,
            }
        return out

    def verdicts(self, checks: dict[str, Any]) -> dict[tuple[str, str], str]:
        """(pool, arm) -> `same` when every check of it is the same, else the first other status."""
        by: dict[tuple[str, str], str] = {}
        for ch in checks.values():
            k = (ch["pool"], ch["arm"])
            if by.get(k, "same") == "same":
                by[k] = ch["status"]
        for k in self.carried:
            by.setdefault(k, "no check")
        return by

    def uncarry(self, pool: str, arm: str) -> int:
        """Remove the records carried for (pool, arm) so the new code runs them; returns how many."""
        paths = self.carried.pop((pool, arm), [])
        for p in paths:
            p.unlink(missing_ok=True)
        return len(paths)

    def clear(self) -> int:
        """Remove every carried copy this carrier put in place or found (they are derived from the other commit's
        records, so nothing is lost: the next run or report makes them again); returns how many."""
        return sum(self.uncarry(pool, arm) for pool, arm in list(self.carried))

    def summary(self) -> dict[str, Any]:
        """For a results file: what was carried from where, and the checks behind it."""
        checks = self.verify()
        return {
            "from_fingerprint": self.fingerprint,
            "arms": list(self.carry.arms),
            "check_seeds": list(self.carry.check_seeds),
            "carried_records": {f"{p}/{a}": len(v) for (p, a), v in sorted(self.carried.items())},
            "checks": checks,
            "verdicts": {f"{p}/{a}": v for (p, a), v in sorted(self.verdicts(checks).items())},
            "note": "carried records keep their own session's step times: cpu_s between a carried arm and a new one "
            "is not interleaved (time_ratio_new_over_old: the same job's time in this session over the old one's)",
        }
