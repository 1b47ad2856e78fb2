"""A study's files are whole or refused, by name (issue 52): a records file that is not gzip, empty, truncated, cut
or missing its results, a summary that is not whole, a raw record or request that cannot be read -- in the reader
(`protocol.records.read`), in each study's regenerate, in the session's resume and in the job runner -- and a records
file whose content no longer matches its digest (edited curves) is refused where it is read. Also the job runner under
an older registered package (`protocol.jobrunner`: `grow_grid`, the pools' warm start)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

import reinforce_ada.bench.analysis as analysis
from studies.belief_quality import regenerate as belief
from studies.protocol import jobrunner, records, resume
from studies.protocol.jobrunner import package_function
from studies.protocol.summary import SummaryError, read_summary
from studies.protocol.tests.regen import same_as_committed

COMMITTED = belief.RESULTS / "records.jsonl.gz"


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)


def _gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return path


def _unsealed(path: Path) -> str:
    """The file's text as commit cc18bcd wrote it: the same lines without the digest."""
    return re.sub(r',"digest":"[0-9a-f]{64}"\}$', "}", "".join(_lines(path)), flags=re.M)


def _small(tmp_path: Path) -> Path:
    f = tmp_path / "records.jsonl.gz"
    runs = [{"id": f"r{i}", "seed": i, "accuracy": [0.1, 0.2 + i / 10]} for i in range(3)]
    records.write(f, runs, [{"name": "a", "runs": {"main": ["r0", "r1"]}}, {"name": "b", "runs": {"main": ["r2"]}}])
    return f


DAMAGE = {
    "truncated gzip": lambda f, t: f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2]),
    "not gzip": lambda f, t: f.write_text(t),
    "empty file": lambda f, t: f.write_bytes(b""),
    "empty gzip": lambda f, t: _gz(f, ""),
    "cut mid-line": lambda f, t: _gz(f, t[: len(t) - 40]),
    "cut before its results": lambda f, t: _gz(f, "".join(x for x in t.splitlines(True) if '"kind":"run"' in x)),
    "a line that is no record": lambda f, t: _gz(f, '{"kind":"note"}\n' + t),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_records_file_that_is_not_whole_is_refused_naming_it_and_what_to_do(damage, tmp_path):
    f = _small(tmp_path)
    before_text = "".join(_lines(f))
    DAMAGE[damage](f, before_text)
    before = f.read_bytes()
    with pytest.raises(records.RecordsError, match=re.escape(str(f))) as e:
        records.read(f)
    assert "git checkout" in str(e.value) or "restore" in str(e.value)
    with pytest.raises(records.RecordsError):  # the next save refuses it: its runs are never dropped
        records.update(f, {"name": "c", "runs": {"main": []}}, [])
    with pytest.raises(records.RecordsError):
        records.write(f, [], [{"name": "c", "runs": {}}])
    assert f.read_bytes() == before


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace('"accuracy":[0.1,0.2]', '"accuracy":[0.1,0.9]'),  # a curve edited
        lambda t: "".join(x for x in t.splitlines(True) if '"name":"b"' not in x),  # the last result line lost
        lambda t: "".join(x for x in t.splitlines(True) if '"id":"r1"' not in x),  # a run lost
    ],
)
def test_a_records_file_edited_after_it_was_written_is_refused_by_its_digest(edit, tmp_path):
    f = _small(tmp_path)
    text = "".join(_lines(f))
    _gz(f, edit(text))
    with pytest.raises(records.RecordsError, match="does not match the digest"):
        records.read(f)


def test_a_file_written_before_digests_is_read_and_gets_its_digest_when_written(tmp_path):
    """The confirmation study's records are written by commit cc18bcd's protocol (no digest): they are read as they
    are, and the next write (a session's `update`, `seal`) adds the digest, nothing else."""
    f = _small(tmp_path)
    sealed = f.read_bytes()
    old = _unsealed(f)
    _gz(f, old)
    assert records.digest(f) is None and records.read(f)[1]["a"] == {"name": "a", "runs": {"main": ["r0", "r1"]}}
    assert records.seal(f) and f.read_bytes() == sealed and not records.seal(f)
    _gz(f, old)
    records.update(f, {"name": "b", "runs": {"main": ["r2"]}}, [])
    assert f.read_bytes() == sealed and records.digest(f) is not None


def test_regenerate_refuses_a_damaged_or_edited_records_file_in_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "records.jsonl.gz"
    bad.write_bytes(COMMITTED.read_bytes()[:1000])  # truncated
    monkeypatch.setattr(belief, "RECORDS", bad)
    with pytest.raises(SystemExit, match=r"error: records file .*records.jsonl.gz: truncated"):
        belief.main(["--out", str(tmp_path / "out")])
    text = _unsealed(COMMITTED)
    line = next(x for x in text.splitlines() if '"kind":"run"' in x)
    run = json.loads(line)
    run["admitted"] = 0.99  # an edited curve, in a sealed file
    f = tmp_path / "edited.jsonl.gz"
    shutil.copy(COMMITTED, f)
    records.seal(f)
    _gz(f, "".join(_lines(f)).replace(line, json.dumps(run, sort_keys=True, separators=(",", ":"))))
    monkeypatch.setattr(belief, "RECORDS", f)
    with pytest.raises(SystemExit, match="does not match the digest"):
        belief.main(["--out", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "belief_quality.json").exists()


def test_regenerate_reads_a_file_written_before_digests_as_before(tmp_path, monkeypatch):
    old = _gz(tmp_path / "records.jsonl.gz", _unsealed(COMMITTED))
    monkeypatch.setattr(belief, "RECORDS", old)
    belief.main(["--out", str(tmp_path / "out")])
    same_as_committed(tmp_path / "out", belief.RESULTS, ["belief_quality.json"])
    assert records.digest(old) is None  # written elsewhere: the records file is left as it is


@pytest.mark.parametrize("text", ["", '{"L1": {"value": 1.', '{"L1": {"value": NaN}}', "[1]", '{"L1": 2}'])
def test_a_summary_that_is_not_whole_is_refused_naming_it(text, tmp_path):
    f = tmp_path / "summary.json"
    f.write_text(text)
    with pytest.raises(SummaryError, match=re.escape(str(f))):
        read_summary(f)
    assert read_summary(tmp_path / "none.json") == {}


def _study(tmp_path: Path) -> tuple[resume.Study, resume.Places]:
    study = resume.Study("demo", {}, lambda rec, i: {"id": i, **rec}, {})
    return study, resume.Places(tmp_path / "records.jsonl.gz", tmp_path / "raw", tmp_path / "out", tmp_path / "run")


def test_a_session_refuses_a_damaged_records_file_before_anything_runs(tmp_path):
    study, places = _study(tmp_path)
    places.records.write_bytes(b"not gzip")

    def launch(req, places):
        raise AssertionError("the runner was started")

    with pytest.raises(SystemExit, match=r"error: records file .*records.jsonl.gz: not a whole gzip file"):
        resume.session(study, places, Path("."), launch=launch)
    assert places.records.read_bytes() == b"not gzip"


def test_a_damaged_raw_record_is_named_with_what_to_do(tmp_path):
    study, places = _study(tmp_path)
    places.raw.mkdir(parents=True)
    (places.raw / "a.json.gz").write_bytes(b"\x1f\x8b cut")
    plan = {"sweep": [], "main": [{"id": "a", "pool": "p"}], "final": True, "pools": {"p": {}}}
    with pytest.raises(records.RecordsError, match=r"a\.json\.gz.*delete it"):
        resume.checkpoint(study, places, plan)
    assert not places.records.exists()


def test_the_job_runner_names_a_request_it_cannot_read(tmp_path, capsys):
    req = tmp_path / "request.json"
    req.write_text('{"config": {')
    assert jobrunner.main([str(req)]) == 2
    err = capsys.readouterr().err
    assert "error: request" in err and str(req) in err and "Traceback" not in err


def test_the_job_runner_runs_past_a_job_that_raises_and_names_it_at_the_end(tmp_path):
    """`run_each`, in worker processes: the job whose record exists comes back from it, the one whose model does not
    exist is logged with its traceback, and the phase ends naming only it."""
    from reinforce_ada.bench import jobs as bench_jobs
    from reinforce_ada.bench.run import Job
    from reinforce_ada.sampling.configure import parse_arm

    def job(arm, model):
        return Job("p", arm, parse_arm("uniform"), 1e-4, 0, 1, 4, 1, model, "t", "e", None, str(tmp_path / arm))

    done = {
        "key": "main/p/a/lr0.0001/seed0",
        "accuracy": [0.1, 0.3],
        "samples_per_step": [4.0],
        "steps": 1,
        "seconds": {"total": 9},
    }
    ok, bad = job("a", "m"), job("b", str(tmp_path / "no-model"))
    bench_jobs._write_record(bench_jobs._record_path(tmp_path, ok, "code", {}), done)
    logs = []
    with pytest.raises(
        jobrunner.RunsFailed, match=r"^1 of 2 runs failed: main/p/b/lr0\.0001/seed0: ConfigError: model.path="
    ) as e:
        jobrunner.run_each([bad, ok], 2, logs.append, tmp_path, "code", {})
    assert "p/a" not in str(e.value)
    assert any("FAILED main/p/b/" in line and "Traceback" in line for line in logs)
    assert any(line.endswith("] main/p/a/lr0.0001/seed0: acc 0.100 -> 0.300, 9 s") for line in logs)


def test_a_job_goes_to_a_worker_as_plain_values_and_comes_back_the_same_job():
    """`portable`: a commit whose feature-composed options class pickle cannot send (`spo`, a length cap, MoPPS draws)
    still has its jobs run in workers; the rebuilt job has the same record path, so the plan finds its record."""
    import pickle

    from reinforce_ada.bench.jobs import _record_path
    from reinforce_ada.bench.run import Job
    from reinforce_ada.sampling.configure import parse_arm

    for arm in ("spo", "uniform:n=2,length_cap=relative,cap_ratio=1.2", "uniform:select=mopps", "seq:exit=balanced"):
        job = Job("p", "a", parse_arm(arm), 1e-4, 0, 1, 4, 1, "m", "t", "e", None, "x")
        back = jobrunner.rebuild(pickle.loads(pickle.dumps(jobrunner.portable(job))))
        assert back == job and _record_path(Path("/c"), back, "fp", {}) == _record_path(Path("/c"), job, "fp", {})


def test_a_commit_without_grow_grid_grows_its_grid_with_this_checkouts_function(monkeypatch):
    """cc18bcd (the confirmation's code) wrote the lr-grid growth inline: the runner reads `grow_grid` from this
    checkout's source and plans the same grown grids as the package's function."""
    grids = {"hard": {"a": (4e-4, 1e-4, 2e-4), "b": (1e-4, 2e-4)}}
    choice = {"hard": {"a": {"best": 4e-4, "at_edge": True}, "b": {"best": 2e-4, "at_edge": False}}}
    assert package_function("grow_grid") is analysis.grow_grid
    monkeypatch.delattr(analysis, "grow_grid")
    older = package_function("grow_grid")
    assert older is not None and older(grids, choice) == (
        {"hard": {"a": (1e-4, 2e-4, 4e-4, 8e-4), "b": (1e-4, 2e-4)}},
        ["hard/a +0.0008"],
    )


def test_long_answer_pools_load_the_running_sums_warm_start_and_an_older_package_the_arithmetic_one(monkeypatch):
    """The runner measured long-answer pools with the arithmetic model (every exact rate 0: `long-hard` came out
    empty); it now asks the package which warm start the pools need, as `compare` does."""
    import reinforce_ada.bench.testbed as testbed
    from studies.protocol.jobrunner import pools_task

    assert pools_task(["long-hard", "long-default"]) == "running_sums"
    assert pools_task(["hard", "default"]) == "arithmetic"
    monkeypatch.delattr(testbed, "pools_task")  # a registered commit from before the long-answer task
    assert pools_task(["hard"]) == "arithmetic"
