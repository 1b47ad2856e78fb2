"""The study resumes across a wiped machine from its committed records file alone: a tiny study (two arms, one
200-prompt pool, a 600-token budget, the sweep grown once) is run once per module, then copied and resumed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import reinforce_ada
from reinforce_ada.bench import jobs as bench_jobs
from reinforce_ada.bench.analysis import choose_lrs
from studies.fewer_samples import regenerate, run
from studies.fewer_samples.study import PREREG, config_fields, load
from studies.protocol import records, resume
from studies.protocol.jobrunner import StudyChanged, check

PACKAGE = Path(reinforce_ada.__file__).resolve().parent
POOL = "p=arithmetic:weights=0/1/1/0/0/0/0,size=200"
TINY = {
    "token_budget": 600,
    "eval_points": 2,
    "lrs": (1e-4, 4e-4),
    "extend_sweep": 1,
    "sweep_seeds": 1,
    "seeds": 2,
    "other_seeds": 2,
    "steps": 50,
    "uniform": ("grpo-n4",),
}


def tiny_study(root: Path, prereg: Path = PREREG) -> tuple[resume.Study, resume.Places, dict]:
    """The registration's grpo-n4 and spo-128 on one tiny pool; every place under `root`."""
    reg = load(prereg)
    fields = config_fields(reg, [POOL])
    fields.update(TINY, arms=tuple(a for a in fields["arms"] if a.partition("=")[0] in ("grpo-n4", "spo-128")))
    places = resume.Places(
        root / "results/records.jsonl.gz", root / "scratch/records", root / "results", root / "scratch"
    )
    return run.build_study(reg, fields, run.parse(["--prereg", str(prereg)])), places, reg


def session(root: Path, prereg: Path = PREREG, launch=resume.in_process, **kw) -> tuple[dict, resume.Places]:
    study, places, _ = tiny_study(root, prereg)
    return resume.session(study, places, PACKAGE, launch=launch, **kw), places


RESULT = "fewer_samples.json"


def result(ctx: dict, places: resume.Places, out: Path) -> dict:
    regenerate.write(ctx, records.runs_of(ctx, records.read(places.records)[0]), out)
    return json.loads((out / "fewer_samples.json").read_text())


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    """The tiny study, run to the end once: its records file, raw records and result under the returned folder."""
    root = tmp_path_factory.mktemp("study")
    ctx, places = session(root)
    result(ctx, places, places.out)
    return root


@pytest.fixture
def copy(done, tmp_path) -> Path:
    shutil.copytree(done, tmp_path / "study")
    return tmp_path / "study"


@pytest.fixture
def no_runs(monkeypatch):
    def refuse(job):
        raise AssertionError(f"{job.key} was run again")

    monkeypatch.setattr(bench_jobs, "run_job", refuse)


def plan_of(places: resume.Places) -> dict:
    return json.loads(places.plan.read_text())


@pytest.mark.slow
def test_a_fresh_clone_runs_nothing_finished_and_chooses_the_same_lrs(copy, no_runs):
    _, places, _ = tiny_study(copy)
    first, raw_sweep = plan_of(places), []
    for e in first["sweep"]:
        with gzip.open(places.raw / f"{e['id']}.json.gz", "rt") as f:
            raw_sweep.append(json.load(f))
    assert len(first["sweep"]) == 6 and len(first["main"]) == 4  # 2 arms x 2 lrs, each grown once; 2 arms x 2 seeds
    assert first["ran"] == {"sweep": 6, "main": 4}
    before = places.records.read_bytes()
    shutil.rmtree(places.raw.parent)  # the machine is wiped: only the committed records file is left
    ctx, _ = session(copy)
    again = plan_of(places)
    assert again["ran"] == {"sweep": 0, "main": 0}
    assert [e["id"] for e in again["sweep"] + again["main"]] == [e["id"] for e in first["sweep"] + first["main"]]
    assert again["lr_sweep"] == first["lr_sweep"] and again["lrs_by_pool"] == first["lrs_by_pool"]
    by_raw = json.loads(json.dumps({"p": choose_lrs(raw_sweep, TINY["steps"])}))
    assert again["lr_sweep"]["by_pool"] == by_raw  # the compact sweep runs choose as the raw records did
    assert places.records.read_bytes() == before  # nothing new to record: not even rewritten
    assert result(ctx, places, copy / "again") == json.loads(places.out.joinpath(RESULT).read_text())


@pytest.mark.slow
def test_only_the_missing_runs_are_run(copy, monkeypatch):
    _, places, _ = tiny_study(copy)
    runs, ctx = resume.recorded("fewer_samples", places.records)
    dropped = ctx["runs"]["main"][-1]
    records.write(
        places.records,
        [r for i, r in runs.items() if i != dropped],
        [{**ctx, "runs": {**ctx["runs"], "main": ctx["runs"]["main"][:-1]}}],
    )
    shutil.rmtree(places.raw.parent)
    ran, real = [], bench_jobs.run_job
    monkeypatch.setattr(bench_jobs, "run_job", lambda job: ran.append(job.key) or real(job))
    again, _ = session(copy)
    assert ran == [runs[dropped]["key"]] and again["runs"] == ctx["runs"]


@pytest.mark.slow
def test_an_edited_registration_is_refused_naming_the_pool_and_arm(copy, no_runs):
    text = PREREG.read_text().replace(
        '"spo-128=spo | run.batch_size=128"', '"spo-128=spo:select=none | run.batch_size=128"'
    )
    (copy / "edited.toml").write_text(text)
    _, places, _ = tiny_study(copy)
    before = places.records.read_bytes()
    shutil.rmtree(places.raw.parent)
    with pytest.raises(StudyChanged, match=r"p/spo-128: sweep/p/spo-128/lr0\.0001/seed1000 is recorded as run"):
        session(copy, prereg=copy / "edited.toml")
    assert places.records.read_bytes() == before


@pytest.mark.slow
def test_the_old_report_path_gives_the_same_compact_runs_and_figures(copy, tmp_path):
    """The pipeline before resuming: `run_compare` over the raw records (only cached), each record's id found by its
    key, compacted; then the result from the records file. Same runs, same lr choice, same figures. (Its summary,
    `bench.analysis.summarize_pool`, raises when an arm runs more steps than grpo-n4, as the registered 32-sample
    arms do: the tiny study's spo-128 runs fewer.)"""
    import dataclasses

    from reinforce_ada.bench.compare import CompareConfig, run_compare

    study, places, reg = tiny_study(copy)
    fields = {k: v for k, v in study.config.items()}
    c = CompareConfig(**fields, records=str(places.raw), run_root=str(tmp_path / "old"), only_cached=True)
    old = run_compare(c, log=lambda m: None)
    ids = {}
    for f in places.raw.glob("*.json.gz"):
        with gzip.open(f, "rt") as fh:
            ids[json.load(fh)["key"]] = f.name[:24]
    old_runs = {phase: [study.compact(r, ids[r["key"]]) for r in rs] for phase, rs in old["runs"].items()}
    ctx = resume.recorded("fewer_samples", places.records)[1]
    new_runs = records.runs_of(ctx, records.read(places.records)[0])
    assert json.loads(json.dumps(old_runs)) == {p: [{**r, "kind": "run"} for r in rs] for p, rs in new_runs.items()}
    assert old["lrs_by_pool"] == ctx["meta"]["lrs_by_pool"]
    old_ctx = {"name": "fewer_samples", "runs": {p: [r["id"] for r in rs] for p, rs in old_runs.items()}}
    old_ctx["meta"] = {"registration": {"content": reg}, "config": json.loads(json.dumps(dataclasses.asdict(c)))}
    records.update(tmp_path / "old.jsonl.gz", old_ctx, [r for rs in old_runs.values() for r in rs])
    old_res = result(old_ctx, resume.Places(tmp_path / "old.jsonl.gz", tmp_path, tmp_path, tmp_path), tmp_path)
    new_res = json.loads((places.out / "fewer_samples.json").read_text())
    assert {k: old_res[k] for k in ("by_pool", "claims", "partial", "runs")} == {
        k: new_res[k] for k in ("by_pool", "claims", "partial", "runs")
    }


@pytest.mark.slow
def test_the_registered_code_runs_in_its_own_process(copy, no_runs):
    """The subprocess path (`resume.spawn`, the package on PYTHONPATH) plans the same ids from the records alone."""
    _, places, _ = tiny_study(copy)
    first = plan_of(places)
    shutil.rmtree(places.raw.parent)
    ctx, _ = session(copy, launch=resume.spawn, poll_s=0.5)
    again = plan_of(places)
    assert again["ran"] == {"sweep": 0, "main": 0} and again["package"] == str(PACKAGE)
    assert [e["id"] for e in again["main"]] == [e["id"] for e in first["main"]] == ctx["runs"]["main"]


def test_a_plan_disagreeing_with_the_records_is_refused():
    e = {"id": "new", "key": "main/hard/spo-64/lr0.0002/seed0", "pool": "hard", "arm": "spo-64"}
    recorded = {"old": {**e, "id": "old"}}
    check([{**e, "id": "old"}], recorded, final=True)  # the same job: fine
    with pytest.raises(StudyChanged, match="hard/spo-64: main/hard/spo-64/lr0.0002/seed0 is recorded as run old"):
        check([e], recorded, final=False)
    with pytest.raises(StudyChanged, match="hard/spo-64: .* is recorded but no longer planned"):
        check([{**e, "key": "main/hard/spo-64/lr0.0002/seed1", "id": "other"}], recorded, final=True)


def test_a_kill_mid_write_leaves_the_previous_records_file(tmp_path, monkeypatch):
    places = resume.Places(tmp_path / "records.jsonl.gz", tmp_path / "raw", tmp_path, tmp_path)
    places.raw.mkdir()
    study = resume.Study("s", {}, lambda rec, i: {"id": i, **rec}, {"command": "x"})
    plan = {
        "sweep": [],
        "main": [],
        "final": True,
        "lrs_by_pool": {},
        "lr_sweep": {},
        "pools": {"p": {}},
        **dict.fromkeys(resume.PLAN_META[:-1]),
    }

    def finish(i: str) -> None:
        e = {"id": i, "key": f"main/p/a/lr0.0001/seed{len(plan['main'])}", "pool": "p", "arm": "a", "phase": "main"}
        plan["main"].append(e)
        with gzip.open(places.raw / f"{i}.json.gz", "wt") as f:
            json.dump({"key": e["key"], "big": "x" * 200_000}, f)

    finish("a" * 24)
    resume.checkpoint(study, places, plan)
    before = places.records.read_bytes()
    finish("b" * 24)
    real = gzip.GzipFile.write

    def killed(self, data):
        real(self, data[: len(data) // 2])
        raise KeyboardInterrupt  # the session is stopped halfway through the write

    monkeypatch.setattr(gzip.GzipFile, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        resume.checkpoint(study, places, plan)
    assert places.records.read_bytes() == before and list(records.read(places.records)[0]) == ["a" * 24]
    monkeypatch.setattr(gzip.GzipFile, "write", real)
    ctx = resume.checkpoint(study, places, plan)  # the next checkpoint records both
    assert ctx["runs"]["main"] == ["a" * 24, "b" * 24] and len(records.read(places.records)[0]) == 2


def test_a_plan_still_in_its_sweep_keeps_the_recorded_main_runs_and_lr_choice(tmp_path):
    """A new session replans the sweep before the main runs: a checkpoint in between drops nothing."""
    places = resume.Places(tmp_path / "records.jsonl.gz", tmp_path / "raw", tmp_path, tmp_path)
    places.raw.mkdir()
    study = resume.Study("s", {}, lambda rec, i: {"id": i, **rec}, {})
    sweep = {"id": "s" * 24, "key": "sweep/p/a/lr0.0001/seed1000", "pool": "p", "arm": "a", "phase": "sweep"}
    main = {"id": "m" * 24, "key": "main/p/a/lr0.0001/seed0", "pool": "p", "arm": "a", "phase": "main"}
    for e in (sweep, main):
        with gzip.open(places.raw / f"{e['id']}.json.gz", "wt") as f:
            json.dump({"key": e["key"]}, f)
    choice = {"lrs_by_pool": {"p": {"a": 1e-4}}, "lr_sweep": {"by_pool": {"p": {"a": {"best": 1e-4}}}}}
    meta = dict.fromkeys(resume.PLAN_META[:-1])
    done = resume.checkpoint(
        study, places, {"sweep": [sweep], "main": [main], "final": True, "pools": {"p": {}}, **choice, **meta}
    )
    shutil.rmtree(places.raw)
    again = resume.checkpoint(
        study,
        places,
        {"sweep": [sweep], "main": [], "final": False, "pools": {"p": {}}, "lrs_by_pool": {}, "lr_sweep": {}, **meta},
    )
    assert again["runs"] == done["runs"] == {"sweep": [sweep["id"]], "main": [main["id"]]}
    assert again["meta"]["lrs_by_pool"] == choice["lrs_by_pool"] and len(records.read(places.records)[0]) == 2


AMENDMENT = '\n[[amendment]]\ndate = "2026-12-07"\nwhy = "seen: it repeats grpo-n4"\nstop = ["{arm}"]\n'


@pytest.mark.slow
def test_an_amendment_stops_an_arm_and_keeps_its_recorded_runs_apart(copy, no_runs):
    (copy / "amended.toml").write_text(PREREG.read_text() + AMENDMENT.format(arm="spo-128"))
    _, places, _ = tiny_study(copy)
    runs, ctx = resume.recorded("fewer_samples", places.records)
    spo = [i for i, r in runs.items() if r["arm"] == "spo-128"]
    shutil.rmtree(places.raw.parent)
    amended, _ = session(copy, prereg=copy / "amended.toml")  # no StudyChanged, nothing run (`no_runs`)
    assert len(spo) == 5 and amended["runs"]["stopped"] == spo  # 3 sweep lrs, 2 main seeds
    assert {p: [i for i in ids if i not in spo] for p, ids in ctx["runs"].items()} == {
        p: amended["runs"][p] for p in ctx["runs"]
    }
    assert set(spo) <= records.read(places.records)[0].keys()  # kept in the file, read by no phase
    res = result(amended, places, copy / "amended")
    assert res["amendments"] == [
        {"date": "2026-12-07", "why": "seen: it repeats grpo-n4", "stop": ["spo-128"], "recorded": 5}
        | {"with_base": 0, "equal_to_base": 0}
    ]
    assert res["runs"]["stopped"] == spo and "spo-128" not in (res["partial"] or "")  # not waited for
    undone, _ = session(copy)  # the amendment withdrawn: the same runs are read again, none is run
    assert undone["runs"] == ctx["runs"]


def test_amendments_are_checked_naming_what_is_wrong(tmp_path):
    def loaded(extra: str) -> None:
        (tmp_path / "r.toml").write_text(PREREG.read_text() + extra)
        load(tmp_path / "r.toml")

    with pytest.raises(SystemExit, match=r"amendment 1: date = 'yesterday'"):
        loaded(AMENDMENT.format(arm="spo-128").replace("2026-12-07", "yesterday"))
    with pytest.raises(SystemExit, match=r"does not run: \['spo-999'\]"):
        loaded(AMENDMENT.format(arm="spo-999"))
    with pytest.raises(SystemExit, match=r"\['grpo-n4'\] are uniform arms"):
        loaded(AMENDMENT.format(arm="grpo-n4"))
    with pytest.raises(SystemExit, match=r"base = \{'spo-128': 'spo-999'\}; map a stopped arm"):
        loaded(AMENDMENT.format(arm="spo-128") + 'base = { spo-128 = "spo-999" }\n')
    with pytest.raises(SystemExit, match=r"why = ''"):
        loaded(AMENDMENT.format(arm="spo-128").replace("seen: it repeats grpo-n4", ""))
    twins = Path(__file__).parents[1] / "registrations" / "long_answers.toml"
    unamended = twins.read_text().split("\n# Amendment,")[0]
    (tmp_path / "t.toml").write_text(unamended + AMENDMENT.format(arm="grpo-n4-cap"))
    with pytest.raises(SystemExit, match=r"claim L1 reads the best uniform arm's twin: stop all of"):
        load(tmp_path / "t.toml")


def test_an_amendment_reports_its_claims_stopped_and_its_twins_against_their_base_arms():
    from studies.fewer_samples.analysis import amendments, claims

    reg = load(Path(__file__).parents[1] / "registrations" / "long_answers.toml")  # its twins stopped on 2026-12-07
    twins = [u + "-cap" for u in reg["instrument"]["uniform"]]
    reg["amendment"] = [{"date": "2026-12-07", "why": "w", "stop": twins}]
    assert claims({}, {**reg, "amendment": []})["L1"]["verdict"] == "incomplete"  # as registered: read, not stopped
    got = claims({}, reg)
    assert {f for f, c in got.items() if c["verdict"] == "stopped"} == {"L1", "L2", "L3"}
    assert got["L1"]["stopped"] == {"date": "2026-12-07", "why": "w"} and got["C1"]["verdict"] != "stopped"
    run = {"pool": "p", "phase": "sweep", "lr": 1e-4, "seed": 1300, "accuracy": [0.1, 0.2], "eval_tokens": [0, 9]}
    kept = [
        {**run, "arm": "grpo-n4-cap"},  # equal to its base run
        {**run, "arm": "grpo-n2x8-cap", "accuracy": [0.1, 0.3]},  # not equal
        {**run, "arm": "grpo-n8x8-cap"},  # no base run recorded
    ]
    runs = [{**run, "arm": "grpo-n4"}, {**run, "arm": "grpo-n2x8"}, {**run, "arm": "grpo-n4", "seed": 1301}]
    (row,) = amendments(reg, kept, runs)
    assert (row["recorded"], row["with_base"], row["equal_to_base"]) == (3, 2, 1)
    reg["amendment"] = [{"date": "2026-12-07", "why": "w", "stop": ["alloc-tokens"], "base": {"alloc-tokens": "alloc"}}]
    (row,) = amendments(reg, [{**run, "arm": "alloc-tokens"}], [{**run, "arm": "alloc"}])  # a base named, no twin
    assert (row["recorded"], row["with_base"], row["equal_to_base"]) == (1, 1, 1)
