"""Carrying records across code commits after a same-seed check (protocol.carry) and the registration's [carry]."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reinforce_ada.bench import jobs as bench_jobs
from reinforce_ada.bench.run import Job
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from studies.protocol import carry as bench_carry
from studies.protocol import prereg

PACKAGE = Path(bench_jobs.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def old_package(tmp_path_factory) -> Path:
    """Another commit's package: this one plus a file (so its fingerprint differs, its schema is the same)."""
    root = tmp_path_factory.mktemp("old") / "reinforce_ada"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "_older_commit.py").write_text("# not in the new commit\n")
    return root


def _job(arm: str, seed: int, phase: str = "main") -> Job:
    return Job("p", arm, parse_arm("uniform"), 1e-4, seed, 1, 4, 1, "m", "t", "e", None, "/run", phase=phase)


def _record(job: Job, acc: float = 0.2, seconds: float = 10.0) -> dict:
    return {
        "key": job.key,
        "accuracy": [0.1, acc],
        "samples_per_step": [4.0],
        "steps": 1,
        "seconds": {"total": seconds},
    }


def test_records_are_carried_except_the_checks_and_a_differing_check_removes_them(tmp_path, old_package, monkeypatch):
    cache, ident = tmp_path / "records", {"p": "weights:pool"}
    cache.mkdir()
    carry = bench_carry.Carry(str(old_package), arms=("a",), check_seeds=(0,))
    carrier = bench_carry.Carrier(carry, cache)
    carrier.set_identity(ident)
    assert carrier.fingerprint != bench_jobs.code_fingerprint()
    jobs = [_job("a", 0), _job("a", 1), _job("a", 1000, "sweep"), _job("b", 1)]
    for j in jobs:  # the old commit's run of every job
        path = bench_jobs._record_path(cache, j, carrier.fingerprint, ident, carrier.schema)
        bench_jobs._write_record(path, _record(j))
    new_fp = bench_jobs.code_fingerprint()
    got = bench_jobs.run_jobs(jobs, 1, lambda m: None, cache, new_fp, ident, only_cached=True, carry=carrier)
    # a's seed 1 and its sweep run are carried (marked); the check (main seed 0) and the arm not named are not
    assert sorted(r["key"] for r in got) == sorted([jobs[1].key, jobs[2].key])
    assert all(r["carried_from"] == carrier.fingerprint[:12] for r in got) and carrier.copied == 2
    assert list(carrier.checks) == [jobs[0].key]
    assert carrier.verify()[jobs[0].key]["status"] == "not run"

    # the new code runs the check: the same values (other timings) -> same; the carried records stand
    calls = []

    def fake_run(job):
        calls.append(job.key)
        return _record(job, seconds=20.0)

    monkeypatch.setattr(bench_jobs, "run_job", fake_run)
    again = bench_carry.Carrier(carry, cache, ident)
    bench_jobs.run_jobs(jobs[:3], 1, lambda m: None, cache, new_fp, ident, carry=again)
    assert calls == [jobs[0].key]  # only the check ran
    check = again.verify()[jobs[0].key]
    assert check["status"] == "same" and check["time_ratio_new_over_old"] == pytest.approx(2.0)
    assert again.verdicts(again.verify()) == {("p", "a"): "same"}
    summary = again.summary()
    assert summary["carried_records"] == {"p/a": 2} and summary["verdicts"] == {"p/a": "same"}
    assert again.clear() == 2 and not again.carried  # copies are derived: removed after a report, made again later
    remade = bench_carry.Carrier(carry, cache, ident)
    bench_jobs.run_jobs(jobs[:3], 1, lambda m: None, cache, new_fp, ident, only_cached=True, carry=remade)
    assert remade.copied == 2 and calls == [jobs[0].key]  # the check's own run was kept, nothing re-ran

    # a metric only the new code writes (here all NaN) is listed, not compared
    bench_jobs._write_record(
        bench_jobs._record_path(cache, jobs[0], new_fp, ident), {**_record(jobs[0]), "new_share": [float("nan")]}
    )
    check = again.verify()[jobs[0].key]
    assert check["status"] == "same" and check["only_new"] == ["new_share"] and check["only_old"] == []

    # a check that differs in a value (not a timing): the arm's carried records are removed, so it runs anew
    new_check = bench_jobs._record_path(cache, jobs[0], new_fp, ident)
    bench_jobs._write_record(new_check, _record(jobs[0], acc=0.3))
    third = bench_carry.Carrier(carry, cache, ident)
    bench_jobs.run_jobs(jobs[:3], 1, lambda m: None, cache, new_fp, ident, only_cached=True, carry=third)
    checks = third.verify()
    assert checks[jobs[0].key]["status"] == "differs" and checks[jobs[0].key]["differs_in"] == ["accuracy"]
    assert third.verdicts(checks) == {("p", "a"): "differs"}
    assert third.uncarry("p", "a") == 2
    left = bench_jobs.run_jobs(jobs[:3], 1, lambda m: None, cache, new_fp, ident, only_cached=True)
    assert [r["key"] for r in left] == [jobs[0].key]  # only the new code's own run remains


def test_carry_rejects_an_empty_arm_list_or_no_check():
    with pytest.raises(ConfigError, match="at least one arm"):
        bench_carry.Carry("x", arms=())
    with pytest.raises(ConfigError, match="not optional"):
        bench_carry.Carry("x", arms=("a",), check_seeds=())


REG = """version = 1
[instrument]
pools = ["hard"]
seeds = [0, 1, 2]
steps = 200
targets = [0.5]
uniform = ["grpo-n4"]
oracles = ["oracle-both"]
arms = ["grpo-n4", "mopps"]
[[claim]]
figure = "C1"
arm = "mopps"
[carry]
from = "6f0959d4a87a0fc0199a75f25d72fa6cfdaa5a42"
arms = ["grpo-n4"]
check_seeds = [0]
"""


def test_the_registrations_carry_table_is_checked(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(REG)
    assert prereg.load(f)["carry"]["arms"] == ["grpo-n4"]
    for bad, match in [
        (REG.replace('arms = ["grpo-n4"]\n', 'arms = ["seq-bal"]\n'), "registered arms"),
        (REG.replace("check_seeds = [0]", "check_seeds = [7]"), "registered seeds"),
        (REG.replace("check_seeds = [0]", "check_seeds = []"), "check_seeds"),
        (REG.replace('from = "6f0959d4a87a0fc0199a75f25d72fa6cfdaa5a42"', 'from = "main"'), "hex sha"),
        (REG + "seeds = [1]\n", "unknown keys"),
    ]:
        f.write_text(bad)
        with pytest.raises(ConfigError, match=match):
            prereg.load(f)


def test_the_repositorys_allocator_registrations_carry_only_arms_the_first_run_has():
    root = Path(__file__).resolve().parents[2] / "compute_to_target" / "registrations"
    first = prereg.load(root / "preregistration.toml")
    carrying = [f for f in sorted(root.glob("preregistration_*.toml")) if "carry" in prereg.read_file(f)]
    assert {f.name for f in carrying} >= {"preregistration_iw.toml", "preregistration_controls.toml"}
    for f in carrying:
        reg = prereg.load(f)
        if "carry" in reg:
            assert set(reg["carry"]["arms"]) <= set(first["instrument"]["arms"])
            assert reg["carry"]["from"] == first["code"]
