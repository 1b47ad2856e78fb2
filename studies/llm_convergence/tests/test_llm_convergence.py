"""The real-model study (studies.llm_convergence.run, its `session`) on a tiny random Llama.

End to end: 2 arms x 2 seeds x 2 steps through the trainer, resumed after a cut and skipped once finished (counted by
train_step calls and run-folder contents); the sweep's bookkeeping; bad input named. The analysis on synthetic
curves of known speed: test_llm_analysis.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from studies.llm_convergence import run as lc
from studies.llm_convergence import session, task
from studies.llm_convergence import study as llm_study
from studies.protocol import records

PREREG = """version = 1
[instrument]
model = "tiny random Llama"
levels = {{ 1 = 1.0, 3 = 1.0 }}
train_prompts = 40
eval_prompts = 12
eval = "exact"
eval_samples = 2
check_samples = 2
steps = {steps}
batch_size = 2
eval_every = 1
max_new_tokens = 4
lora_r = 4
lrs = [1e-4, 2e-4, 4e-4]
extend_sweep = 0
sweep_seeds = [1000]
seeds = [0, 1]
other_seeds = [0, 1]
arms = ["grpo-n4", "seq-bal"]
targets = [0.3, 0.6]
[[claim]]
figure = "L1"
arm = "seq-bal"
[[claim]]
figure = "L2"
arm = "seq-bal"
"""


def write_prereg(tmp_path: Path, steps: int = 2, **replace: str) -> Path:
    text = PREREG.format(steps=steps)
    for old, new in replace.items():
        text = text.replace(old, new)
    p = tmp_path / "prereg.toml"
    p.write_text(text)
    return p


def argv(tmp_path: Path, prereg: Path, model_dir: Path, *extra: str) -> list[str]:
    return [
        "--prereg",
        str(prereg),
        "--model",
        str(model_dir),
        "--template",
        "plain",
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(tmp_path / "out" / "llm"),
        "--no-summary",
        *extra,
    ]


@pytest.fixture
def count_steps(monkeypatch):
    """Counts Trainer.train_step calls; `cut_at` makes the n-th call raise KeyboardInterrupt (a run stopped mid-way)."""
    from reinforce_ada.training.trainer import Trainer

    real = Trainer.train_step
    state = {"calls": 0, "cut_at": None, "peek_at": None, "peeked": None}

    def step(self):
        state["calls"] += 1
        if state["calls"] == state["peek_at"]:  # what a process killed outright here would leave
            f = self.run_dir / "sessions.json"
            state["peeked"] = json.loads(f.read_text()) if f.exists() else []
        if state["calls"] == state["cut_at"]:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(Trainer, "train_step", step)
    return state


@pytest.mark.slow
def test_end_to_end_resume_and_skip(tmp_path, model_dir, count_steps):
    prereg = write_prereg(tmp_path, steps=3)
    # sweep: 3 lrs x 1 seed x 3 steps; main: 2 arms x 2 seeds x 3 steps. Cut the 2nd main run at its 3rd step.
    count_steps["cut_at"] = 9 + 3 + 3
    count_steps["peek_at"] = 9 + 3 + 2  # the cut run's 2nd step: its step-1 checkpoint is written, no exception yet
    with pytest.raises(KeyboardInterrupt):
        lc.main(argv(tmp_path, prereg, model_dir))
    partial = _with_runs(tmp_path / "out" / "llm.json")
    lr = f"lr{partial['lr_sweep']['lr']:g}"  # a random model's gains are ~0: whichever lr, the runs use it
    assert len([r for r in partial["runs"] if r["phase"] == "sweep"]) == 3
    runs = tmp_path / "work" / "runs" / "main"
    finished = sorted(p.parent.relative_to(runs).as_posix() for p in runs.rglob("record.json"))
    assert finished == [f"grpo-n4/{lr}/seed0"]
    cut = runs / "seq-bal" / lr / "seed0"
    assert not (cut / "record.json").exists() and (cut / "checkpoints" / "step_000002").is_dir()
    assert json.loads((cut / "sessions.json").read_text())[-1]["cut_short"] is True
    (seen,) = count_steps["peeked"]  # a SIGKILL after the first checkpoint still leaves this session's entry
    assert seen["cut_short"] is True and seen["last_checkpoint"] == 1 and "load_end" in seen and seen["cpu"]
    assert partial["partial"] and f"main/seq-bal/{lr}/seed0" in partial["partial"]
    assert partial["headline"]["L1"]["status"] == "unmeasured"

    count_steps.update(calls=0, cut_at=None)
    assert lc.main(argv(tmp_path, prereg, model_dir)) == 0
    assert count_steps["calls"] == 1 + 3 + 3  # the cut run's last step, then the two seed-1 runs; the rest skipped
    res = _with_runs(tmp_path / "out" / "llm.json")
    assert res["partial"] is None and (tmp_path / "out" / "llm.png").stat().st_size > 0
    resumed = next(r for r in res["runs"] if r["key"] == f"main/seq-bal/{lr}/seed0")
    assert [s.get("resumed_from") for s in resumed["sessions"]] == [None, 2]  # the cut session, then the resumed one
    assert [s.get("cut_short", False) for s in resumed["sessions"]] == [True, False]
    assert resumed["eval_step"] == [0, 1, 2, 3] and len(resumed["tokens_per_step"]) == 3
    for r in res["runs"]:
        s = r["sessions"][-1]
        assert s["threads"] == 1 and s["cpu"].endswith(" 1 threads") and s["date"] and "load_start" in s
        assert r["sampled_check"]["prompts"] == 12 and r["start"]["rates"] is not None
        assert len(r["process_s"]) == 3 and all(v > 0 for v in r["process_s"])  # this process's CPU seconds
    assert res["headline"]["L1"]["status"] in ("complete", "unmeasured")  # a random model may gain nothing
    assert res["headline"]["L1"]["preregistered"] is False  # the test's file is not committed
    assert set(res["analysis"]["table"]) == {"grpo-n4", "seq-bal"}
    assert set(res["testbed"]["rows"]) == {"seq-bal"}  # beside the committed testbed's factors
    assert set(res["testbed"]["rows"]["seq-bal"]["testbed"]) == {"small", "default", "hard", "mixed"}

    count_steps["calls"] = 0
    assert lc.main(argv(tmp_path, prereg, model_dir)) == 0
    assert count_steps["calls"] == 0  # everything finished: nothing trains again

    (tmp_path / "out" / "llm.json").unlink()  # --report-only rebuilds the results from the run folders alone
    (tmp_path / "out" / "records.jsonl.gz").unlink()
    assert lc.main(argv(tmp_path, prereg, model_dir, "--report-only")) == 0
    assert count_steps["calls"] == 0
    again = _with_runs(tmp_path / "out" / "llm.json")
    assert again["partial"] is None and [r["key"] for r in again["runs"]] == [r["key"] for r in res["runs"]]
    for fig in ("L1", "L2", "L2p"):
        same = ("status", "value", "per_seed", "seeds")
        assert {k: again["headline"][fig][k] for k in same} == {k: res["headline"][fig][k] for k in same}


@pytest.mark.slow
def test_the_sampled_measure_runs_no_exact_pass_and_orders_the_headline_arms_first(tmp_path, model_dir, monkeypatch):
    """eval = "sampled" (the registered study's measure): no exact pass at any evaluation, no sampled-vs-exact check,
    a registered matched n, and GRPO-n4 plus the claimed arm on all seeds before the other arms."""
    prereg = write_prereg(
        tmp_path,
        steps=1,
        **{
            'eval = "exact"': 'eval = "sampled"\nmatched_n = 3',
            'arms = ["grpo-n4", "seq-bal"]': 'arms = ["grpo-n4", "seq-bal", "grpo-matched"]',
        },
    )
    order, real = [], session.run_one
    monkeypatch.setattr(session, "run_one", lambda spec: order.append((spec.phase, spec.arm)) or real(spec))
    assert lc.main(argv(tmp_path, prereg, model_dir)) == 0
    res = _with_runs(tmp_path / "out" / "llm.json")
    main = [r for r in res["runs"] if r["phase"] == "main"]
    assert len(main) == 6 and res["grpo_matched"] == {"n": 3, "source": "registered"}
    for r in main:
        assert r["sampled_check"] is None and r["exact_accuracy"] == [None, None] and r["start"]["rates"] is None
        assert len(r["process_s"]) == 1 and r["process_s"][0] > 0
    arms = [arm for phase, arm in order if phase == "main"]
    assert set(arms[:4]) == {"grpo-n4", "seq-bal"} and arms[4:] == ["grpo-matched"] * 2
    assert set(res["headline"]) == {"L1", "L2", "L2p"} and res["headline"]["L2p"]["arm"] is None


def test_a_resumed_sweep_grows_the_grid_as_the_first_session_did():
    """A study restarted after its grid grew holds the grown grid's runs from the start; the choice on the first
    grid must not read them (it did: grid and `extended` then named the first grid while the lr was a grown one)."""

    def rec(lr, gain, arm="grpo-n4"):
        key = f"sweep/{arm}/lr{lr:g}/seed1000"
        return {
            "key": key,
            "arm": arm,
            "phase": "sweep",
            "lr": lr,
            "seed": 1000,
            "eval_tokens": [0, 10, 20],
            "accuracy": [0.1, 0.1 + gain, 0.1 + gain],
        }

    study = object.__new__(session.Study)  # the sweep's bookkeeping alone: no model, no runs
    study.inst = {"lrs": [1e-4, 2e-4], "sweep_seeds": [1000], "extend_sweep": 2, "arms": ["grpo-n4", "spo"]}
    study.records = {r["key"]: r for r in [rec(1e-4, 0.1), rec(2e-4, 0.2), rec(4e-4, 0.3), rec(8e-4, 0.25)]}
    study.records.update({r["key"]: r for r in [rec(1e-4, 0.5, "spo"), rec(2e-4, 0.1, "spo")]})  # another arm's
    grids = []
    study.spec = lambda phase, arm, strategy, lr, seed: lr
    study.strategy = lambda arm: arm
    study.run = lambda specs: grids.append(sorted(set(specs)))  # every run already finished: nothing to do
    sweep = study.lr_sweep("grpo-n4")
    assert sweep["lr"] == 4e-4  # SPO's runs, best at 1e-4, are not read
    assert grids == [[1e-4, 2e-4], [1e-4, 2e-4, 4e-4], [1e-4, 2e-4, 4e-4, 8e-4]]
    assert sweep["grid"] == [1e-4, 2e-4, 4e-4, 8e-4] and sweep["extended"] == 2
    assert sweep["edge"] is None and "note" not in sweep
    study.inst["extend_sweep"] = 1  # one growth allowed: 4e-4 is chosen at the edge, and said so
    sweep = study.lr_sweep("grpo-n4")
    assert sweep["lr"] == 4e-4 and sweep["edge"] == "high" and "high edge" in sweep["note"]


def test_level_schedule_and_task(tmp_path):
    assert task.level_schedule({1: 1.0, 2: 1.0}, 4) == [1, 2, 1, 2]
    train, held = task.make_task(tmp_path, {2: 1.0, 5: 3.0}, 80, 40)
    rows = [json.loads(x) for x in held.read_text().splitlines()]
    assert len(rows) == 40 and sum(r["level"] == 5 for r in rows) == 30
    assert rows[0]["prompt"].endswith("Answer with just the number.")
    qs = {r["prompt"] for r in rows}
    assert not qs & {json.loads(x)["prompt"] for x in train.read_text().splitlines()}
    assert task.make_task(tmp_path, {2: 1.0, 5: 3.0}, 80, 40) == (train, held)  # deterministic
    with pytest.raises(SystemExit, match=r"\[9\]: levels are 1..5"):
        task.make_task(tmp_path, {9: 1.0}, 4, 4)
    working, _ = task.make_task(tmp_path, {2: 1.0, 5: 3.0}, 80, 40, ask="working")  # another request: other data
    first = json.loads(working.read_text().splitlines()[0])["prompt"]
    assert working.parent != train.parent and first.endswith("then end with: The answer is <number>.")
    with pytest.raises(SystemExit, match=r"ask = 'sentence'; use one of \('number', 'working'\)"):
        task.make_task(tmp_path, {2: 1.0}, 4, 4, ask="sentence")


def test_bad_input_is_named(tmp_path, model_dir):
    prereg = write_prereg(tmp_path)
    with pytest.raises(
        SystemExit, match=r"--arms \['nope'\]: choose from the registered arms \['grpo-n4', 'seq-bal'\]"
    ):
        lc.main(argv(tmp_path, prereg, model_dir, "--arms", "grpo-n4,nope"))
    bad = write_prereg(tmp_path, **{"max_new_tokens = 4\n": ""})
    with pytest.raises(SystemExit, match=r"missing 'max_new_tokens'"):
        lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(tmp_path, **{'"seq-bal"]\ntargets': '"seq-bal", "dapo"]\ntargets'})
    with pytest.raises(SystemExit, match=r"arms \['dapo'\]: every arm must be one of \['grpo-n4', 'seq-bal'"):
        lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(tmp_path, **{'figure = "L2"': 'figure = "C1"'})
    with pytest.raises(SystemExit, match=r"figure 'C1'; use one of \['L1', 'L2', 'L2p'\]"):
        lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(tmp_path, **{'eval = "exact"': 'eval = "exact"\nmin_shared_gain = 2'})
    with pytest.raises(SystemExit, match=r"min_shared_gain = 2 must be an accuracy in \(0, 1\)"):
        lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(tmp_path, **{'eval = "exact"': 'eval = "greedy"'})
    with pytest.raises(SystemExit, match=r"eval = 'greedy'; use one of \('exact', 'sampled'\)"):
        lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(
        tmp_path, **{'eval = "exact"': 'eval = "sampled"', '"seq-bal"]\ntargets': '"seq-bal", "grpo-matched"]\ntargets'}
    )
    with pytest.raises(SystemExit, match=r"matched_n = None: budget-matched GRPO's n must be registered"):
        lc.main(argv(tmp_path, bad, model_dir))
    with pytest.raises(SystemExit, match="no config.json"):
        lc.main(argv(tmp_path, write_prereg(tmp_path), tmp_path / "nowhere"))
    with pytest.raises(SystemExit):
        lc.parse(["--workers", "0"])
    with pytest.raises(ConfigError, match="does not exist"):
        llm_study.load(tmp_path / "missing.toml", lc.ARM_NAMES)


def test_the_repository_registration_loads():
    reg = llm_study.load(lc.PREREG, lc.ARM_NAMES)
    arm = llm_study.registered_arm(reg, "L1")
    assert arm in reg["instrument"]["arms"] and len(llm_study.seeds_for(reg, arm)) >= 5
    assert all(len(llm_study.seeds_for(reg, a)) >= 3 for a in reg["instrument"]["arms"])
    spo = llm_study.load(lc.HERE / "registrations" / "preregistration_llm_spo.toml", lc.ARM_NAMES)
    assert spo["name"] == "llm_spo" and llm_study.registered_arm(spo, "L1") == "spo-32"
    assert llm_study.lr_plan(spo["instrument"]) == (["spo-32"], {"grpo-n4": 4e-4})
    same = ("levels", "train_prompts", "eval_prompts", "eval", "eval_samples", "steps", "max_new_tokens", "lora_r")
    assert {k: spo["instrument"][k] for k in same} == {k: reg["instrument"][k] for k in same}  # the same task
    assert spo["instrument"]["seeds"] == reg["instrument"]["seeds"]


def test_help_and_smoke_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        lc.parse(["--help"])
    assert e.value.code == 0 and "--smoke" in capsys.readouterr().out
    args = lc.parse(["--smoke"])
    assert args.work.endswith("llm_smoke") and Path(args.out).parent == Path(args.work)  # scratch output only


def test_committed_runs_count_only_under_the_same_registration(tmp_path):
    """A fresh clone continues from the committed results JSON, but only from one written under the same
    registration file (its sha256); a smoke JSON or another registration's runs never count. A record that was
    itself a skip of a finished run is a finished run too."""
    prov = {"sha256": "abc"}
    runs = [{"key": "main/grpo-n4/lr0.0001/seed0"}, {"key": "main/mopps/lr0.0001/seed0"}]
    path = tmp_path / "llm_convergence.json"
    assert session.committed_runs(path, prov) == {}  # nothing written yet

    def write(meta):  # the result's context and runs, as the study writes them beside its JSON
        ctx = {"name": "llm_convergence", "meta": meta, "runs": {"all": [r["key"] for r in runs], "main": []}}
        records.write(tmp_path / "records.jsonl.gz", [{"id": r["key"], **r} for r in runs], [ctx])

    write({"preregistration_file": {"sha256": "abc"}})
    assert sorted(session.committed_runs(path, prov)) == [r["key"] for r in runs]
    write({"preregistration_file": {"sha256": "other"}})
    assert session.committed_runs(path, prov) == {}
    write({"smoke": True, "preregistration_file": {"sha256": "abc"}})
    assert session.committed_runs(path, prov) == {}


def test_same_run_ignores_this_machine_and_nothing_else():
    """A finished run is the same run on another machine (paths, thread count) but not with other data, another
    horizon or another measure."""
    from studies.llm_convergence.run_one import MACHINE_FIELDS, same_run

    a = {
        "phase": "main",
        "arm": "mopps",
        "lr": 1e-4,
        "seed": 0,
        "steps": 60,
        "eval": "sampled",
        "data": "d1",
        "folder": "/a/run",
        "model": "/a/m",
        "train_path": "/a/t",
        "eval_path": "/a/e",
        "threads": 1,
    }
    b = {**a, "folder": "/b/run", "model": "/b/m", "train_path": "/b/t", "eval_path": "/b/e", "threads": 2}
    assert set(MACHINE_FIELDS) <= set(a) and same_run(a, b)
    for key, value in (("data", "d2"), ("steps", 30), ("eval", "exact"), ("lr", 2e-4)):
        assert not same_run(a, {**a, key: value}), key
    # a field added since (the verifier): a record without it ran the default, and is another run than a registration
    # asking for another verifier
    assert same_run(a, {**a, "verifier": "numeric"}) and not same_run(a, {**a, "verifier": "numeric_marked"})


def _with_runs(path):
    """The study's result JSON with its runs read back from the records file beside it (the JSON names them)."""
    res = json.loads(path.read_text())
    runs, _ = records.read(path.parent / "records.jsonl.gz")
    return {**res, "runs": [{k: v for k, v in runs[i].items() if k != "id"} for i in res["runs"]["all"]]}
