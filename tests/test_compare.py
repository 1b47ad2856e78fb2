"""`reinforce-ada compare`: arms table, pools, one exact-evaluated run, goals from synthetic runs, summary merging."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import update_summary
from reinforce_ada.bench import analysis, compute
from reinforce_ada.bench import jobs as bench_jobs
from reinforce_ada.bench.arms import ARMS, matched_n, resolve_arms, split_arms
from reinforce_ada.bench.compare import CompareConfig, plan_jobs
from reinforce_ada.bench.report import agreement, format_agreement
from reinforce_ada.bench.run import Job, eval_steps, run_job
from reinforce_ada.bench.testbed import build_pool, level_shares, parse_pool
from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.simulation.plan import plan


def g(x):
    return 0.15 + 0.25 * (1 - np.exp(-np.asarray(x, dtype=float) / 150))


def record(arm, seed, k, steps, tokens_per_step, no_signal, t, lr=4e-4):
    x = np.arange(0, steps + 1, 10)
    acc = g(k * x).tolist()
    return {
        "arm": arm,
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "eval_step": x.tolist(),
        "eval_tokens": (x * tokens_per_step).tolist(),
        "accuracy": acc,
        "per_level": {"L5": acc},
        "no_signal_share": [no_signal] * steps,
        "zero_adv_share": [no_signal] * steps,
        "samples_per_step": [tokens_per_step / 5] * steps,
        "tokens_per_step": [tokens_per_step] * steps,
        "time_step_s": [t] * steps,
        "time_generate_s": [t / 2] * steps,
        "time_train_s": [t / 2] * steps,
        "sampled_check": {"exact": acc[-1], "sampled": acc[-1] + 0.001},
    }


def test_goals_from_synthetic_runs_with_known_factors():
    recs = []
    for s in range(5):
        recs += [
            record("grpo-n4", s, 1.0, 400, 100, 0.6 + 0.01 * s, 0.05),
            record("seq-bal", s, 2.0, 200, 500, 0.12, 0.1),
            record("grpo-matched", s, 1.6, 200, 500, 0.3, 0.2),
        ]
    summ = analysis.summarize_pool(recs, "grpo-n4", "grpo-matched", 200)
    t = summ["table"]
    assert t["seq-bal"]["k_steps"]["value"] == pytest.approx(2.0, rel=0.02)
    assert t["seq-bal"]["k_tokens"]["value"] == pytest.approx(0.4, rel=0.02)
    assert t["seq-bal"]["k_tokens_vs_matched"]["value"] == pytest.approx(2.0 / 1.6, rel=0.02)
    assert t["grpo-n4"]["k_steps"]["value"] == pytest.approx(1.0)
    # targets: fractions of the reference's gain over its whole run, reached in half the steps by a 2x arm
    half = t["grpo-n4"]["targets"]["0.5"]["steps"]
    assert t["seq-bal"]["targets"]["0.5"]["steps"] == pytest.approx(half / 2, rel=0.05)
    assert t["seq-bal"]["sampled_minus_exact"]["median"] == pytest.approx(0.001)
    goals = analysis.goals(recs, summ, "grpo-n4", "grpo-matched", "seq-bal", 200)
    assert goals["P1"]["value"] == pytest.approx(2.0, rel=0.02)
    assert goals["P2"]["value"] == pytest.approx(1.25, rel=0.02)
    assert goals["P2b"]["value"] == pytest.approx(0.4, rel=0.02)
    assert goals["P3"]["value"] == pytest.approx(0.12 / 0.62) and goals["P3"]["lo"] <= goals["P3"]["value"]
    assert goals["P4"]["value"] == pytest.approx(2.0)


def test_agreement_between_two_runs():
    def res(p1, p3):
        return {"by_pool": {"default": {"goals": {"P1": p1, "P3": p3, "P2": {"value": None}}}}}

    a = res({"value": 2.0, "lo": 1.8, "hi": 2.2}, {"value": 0.5, "lo": 0.45, "hi": 0.55})
    b = res({"value": 2.1, "lo": 1.9, "hi": 2.4}, {"value": 0.7, "lo": 0.65, "hi": 0.75})
    agree = agreement(a, b)["default"]
    assert set(agree) == {"P1", "P3"}
    assert agree["P1"]["overlap"] and agree["P1"]["second_in_first"] and agree["P1"]["first_in_second"]
    assert agree["P3"]["overlap"] is False and "DISJOINT" in format_agreement({"default": agree})


def test_lr_choice_by_curve_area():
    recs = [record("seq-bal", 1000, k, 200, 500, 0.1, 0.1, lr=lr) for k, lr in ((1.0, 2e-4), (1.5, 4e-4), (1.2, 8e-4))]
    choice = analysis.choose_lrs(recs, 200)["seq-bal"]
    assert (
        choice["best"] == 4e-4 and not choice["at_edge"] and set(choice["area_gain"]) == {"0.0002", "0.0004", "0.0008"}
    )


def test_arms_table_skips_specs_that_do_not_parse_yet():
    arms, skipped = resolve_arms(["grpo-n4", "seq-bal", "mine=seq:exit=positive,k_pos=2", "x=uniform:nope=1"])
    assert [a.name for a in arms] == ["grpo-n4", "seq-bal", "mine"]
    assert arms[2].cfg.k_pos == 2 and "nope" in skipped["x"]
    with pytest.raises(ConfigError, match="unknown arm"):
        resolve_arms(["grpo-n4", "ppo"])
    with pytest.raises(ConfigError, match="reference"):
        resolve_arms(["seq-bal"])
    assert split_arms("a,b") == ["a", "b"] and split_arms("a; m=seq:exit=positive,k_pos=2") == [
        "a",
        "m=seq:exit=positive,k_pos=2",
    ]
    assert {"grpo-n4", "grpo-n16", "grpo-matched", "dapo-n4", "seq-bal", "seq-pos", "est", "est-pred"} <= set(ARMS)


def test_matched_n_is_seq_balanced_expected_samples():
    rates = np.array([0.01, 0.1, 0.3, 0.6])
    n, expected = matched_n(parse_arm("seq:exit=balanced"), rates)
    assert expected == pytest.approx(np.mean([r.expected_samples for r in plan(parse_arm("seq:exit=balanced"), rates)]))
    assert n == round(expected) and 4 < n <= 32


def test_pool_specs():
    hard = parse_pool("hard")
    assert hard.filter == (0.0, 0.375) and hard.weights == (0, 0, 1, 1, 1, 1, 1) and hard.filter_samples == 16
    mine = parse_pool("mine=arithmetic:weights=0/1/1,size=50,filter=0.1-0.5,filter_samples=8")
    assert (mine.name, mine.size, mine.filter, mine.filter_samples) == ("mine", 50, (0.1, 0.5), 8)
    assert parse_pool("f=file:path=a.jsonl,eval=b.jsonl").eval_path == "b.jsonl"
    for bad, msg in (
        ("nope", "unknown pool"),
        ("x=file:size=3", "path"),
        ("x=arithmetic:size=q", "size"),
        ("x=arithmetic:weights=1/1,filter=0.5-0.2", "lo"),
        ("x=arithmetic:colour=red", "bad option"),
    ):
        with pytest.raises(ConfigError, match=msg):
            parse_pool(bad)


def test_pool_filter_and_level_weights(tmp_path, tiny_llama, char_tokenizer):
    spec = parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=20")
    pool = build_pool(spec, tiny_llama, char_tokenizer, tmp_path)
    assert len(pool.train) == 20 and {p.level for p in pool.held_out} == {1, 2}
    assert pool.level_weights == level_shares(pool.train, pool.held_out)
    assert sum(w for _, w in pool.level_weights) == pytest.approx(1.0)
    rows = [json.loads(x) for x in open(pool.train_path)]
    assert [r["id"] for r in rows] == [p.id for p in pool.train] and rows[0]["level"] in (1, 2)
    again = build_pool(spec, tiny_llama, char_tokenizer, tmp_path / "again")
    assert again.digest == pool.digest and np.array_equal(again.train_rates, pool.train_rates)
    # the random tiny model solves almost nothing: a filter that keeps 0 < c/k finds no prompt
    with pytest.raises(ConfigError, match="empty"):
        build_pool(
            parse_pool("q=arithmetic:weights=1/1/0/0/0/0/0,size=20,filter=0.5-1"), tiny_llama, char_tokenizer, tmp_path
        )


def test_one_run_is_evaluated_exactly_and_checked_by_sampling(tmp_path, model_dir, tiny_llama, char_tokenizer):
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    job = Job(
        pool="p",
        arm="grpo-n4",
        strategy=parse_arm("uniform:n=2"),
        lr=1e-3,
        seed=0,
        steps=3,
        batch_size=4,
        eval_every=2,
        model_path=str(model_dir),
        train_path=pool.train_path,
        eval_path=pool.eval_path,
        level_weights=pool.level_weights,
        run_dir=str(tmp_path / "run"),
        check_samples=2,
    )
    rec = run_job(job)
    assert rec["eval_step"] == [0, 2, 3] == eval_steps(3, 2) and len(rec["accuracy"]) == 3
    w = dict(pool.level_weights)
    first = sum(w[lv] * np.mean(pool.held_out_rates[[p.level == lv for p in pool.held_out]]) for lv in w)
    assert rec["accuracy"][0] == pytest.approx(first, rel=1e-5)  # step 0 is the pool's own warm-start measurement
    # the random model solves nothing in 8 tries: no prompt has signal, no update runs, the accuracy stays put
    assert rec["no_signal_share"] == [1.0] * 3 and rec["accuracy"] == [rec["accuracy"][0]] * 3
    assert len(rec["samples_per_step"]) == 3 and rec["samples_per_step"][0] == 8
    assert rec["eval_tokens"][0] == 0 and rec["eval_tokens"][-1] == sum(rec["tokens_per_step"])
    assert set(rec["sampled_check"]) >= {"exact", "sampled", "samples"}
    assert not (tmp_path / "run").exists()


def test_jobs_are_interleaved_by_seed_and_the_reference_runs_longer(tmp_path, tiny_llama, char_tokenizer):
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/0/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    arms, _ = resolve_arms(["grpo-n4", "seq-bal", "grpo-matched", "est"])
    c = CompareConfig(steps=10, seeds=3, other_seeds=1, sweep_seeds=2, lrs=(1e-4, 2e-4))
    main_jobs = plan_jobs(c, arms, [pool], "m", {pool.spec.name: {a.name: 2e-4 for a in arms}})
    assert [(j.arm, j.seed) for j in main_jobs[:4]] == [("grpo-n4", 0), ("seq-bal", 0), ("grpo-matched", 0), ("est", 0)]
    assert sum(j.arm == "est" for j in main_jobs) == 1 and sum(j.arm == "seq-bal" for j in main_jobs) == 3
    assert {j.steps for j in main_jobs if j.arm == "grpo-n4"} == {20} and {
        j.steps for j in main_jobs if j.arm != "grpo-n4"
    } == {10}
    matched = {j.strategy.n for j in main_jobs if j.arm == "grpo-matched"}
    assert matched == {matched_n(parse_arm("seq:exit=balanced"), pool.train_rates)[0]}
    sweep = plan_jobs(c, arms, [pool], "m", None, {pool.spec.name: {a.name: c.lrs for a in arms}})
    assert len(sweep) == 4 * 2 * 2 and min(j.seed for j in sweep) >= 1000 and {j.phase for j in sweep} == {"sweep"}


def test_finished_runs_are_reused_by_the_same_code(tmp_path, monkeypatch):
    calls = []

    def fake_run(job):
        calls.append(job.key)
        return {"key": job.key, "accuracy": [0.1, 0.2], "samples_per_step": [4.0], "steps": 1, "seconds": {"total": 0}}

    monkeypatch.setattr(bench_jobs, "run_job", fake_run)
    jobs = [
        Job("p", arm, parse_arm("uniform"), 1e-4, 0, 1, 4, 1, "m", "t", "e", None, str(tmp_path / arm))
        for arm in ("a", "b")
    ]
    logs = []
    first = bench_jobs.run_jobs(jobs, 1, logs.append, tmp_path / "records", "code-1")
    assert calls == [j.key for j in jobs] and [r["key"] for r in first] == calls
    again = bench_jobs.run_jobs(jobs, 1, logs.append, tmp_path / "records", "code-1")
    assert again == first and len(calls) == 2 and "reusing 2 of 2" in logs[-1]
    bench_jobs.run_jobs(jobs[:1], 1, logs.append, tmp_path / "records", "code-2")  # other code: run again
    assert len(calls) == 3
    assert len(bench_jobs.code_fingerprint()) == 64
    # another machine: other paths, the same weights and pool (identity) -> the same records
    moved = [dataclasses.replace(j, model_path="/elsewhere/m", train_path="/x/t", run_dir="/y") for j in jobs]
    ident = {"p": "weights-sha:pool-digest"}
    bench_jobs.run_jobs(jobs, 1, logs.append, tmp_path / "r2", "code-1", ident)
    n = len(calls)
    assert bench_jobs.run_jobs(moved, 1, logs.append, tmp_path / "r2", "code-1", ident)[0]["key"] == jobs[0].key
    assert len(calls) == n
    assert all(f.name.endswith(".json.gz") for f in (tmp_path / "r2").iterdir())


def test_update_summary_keeps_other_entries(tmp_path):
    f = tmp_path / "summary.json"
    f.write_text(json.dumps({"P5": {"value": 0.5}}))
    update_summary(f, {"P1": {"value": 2.0, "goal": ">= 2.0", "what": "x"}}, "cmd")
    s = json.loads(f.read_text())
    assert s["P5"] == {"value": 0.5} and s["P1"]["command"] == "cmd" and "date" in s["P1"]
    f.write_text(json.dumps({"P4": {"value": 1.5, "smollm2": {"value": 1.1}}}))
    update_summary(f, {"P4": {"value": 1.9}}, "cmd", nested={"P4": "convergence_run"})
    s = json.loads(f.read_text())["P4"]
    assert s["value"] == 1.5 and s["smollm2"] == {"value": 1.1} and s["convergence_run"]["value"] == 1.9


def test_compare_cli_rejects_bad_input(capsys):
    for argv, msg in (
        (["compare", "--arms", "grpo-n4,ppo"], "ppo"),
        (["compare", "--lr", "seq-bal:4e-4"], "ARM=LR"),
        (["compare", "--lrs", "a,b"], "--lrs"),
        (["compare", "--check-against", "nowhere.json"], "no such"),
        (["compare", "--preregistration", "nowhere.toml"], "does not exist"),
        (["compare", "--extend-sweep", "-1"], "extend_sweep"),
        (["compare", "--report-only", "--fingerprint-of", "/nonexistent"], "--fingerprint-of"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err


def test_compare_writes_where_the_user_says_and_the_repository_script_guards_its_results(tmp_path):
    # the user command has no opinion on this repository's folders; benchmarks/convergence.py keeps --quick out of
    # the committed results
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "convergence.py"
    spec = importlib.util.spec_from_file_location("convergence_script", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit, match="scratch"):
        mod.run(["--quick", "--out", str(mod.RESULTS / "x")])
    assert CompareConfig().out.startswith("runs/")


def test_compute_script_checks_its_pools_and_prints_the_table(tmp_path, capsys):
    from benchmarks import compute_to_target as ctt

    reg = {
        "instrument": {"seeds": [0, 1, 2], "steps": 10, "uniform": ["grpo-n4"], "oracles": ["oracle-both"]},
        "claim": [],
    }
    f = ctt.config_fields(reg, ["hard"])
    assert f["seeds"] == f["other_seeds"] == 3 and f["long_arms"] == ("grpo-n4",) and f["sweep_each_pool"]
    with pytest.raises(SystemExit, match="consecutive"):
        ctt.config_fields({**reg, "instrument": {**reg["instrument"], "seeds": [0, 2]}}, ["hard"])
    prereg = tmp_path / "p.toml"
    prereg.write_text(
        'version = 1\n[instrument]\npools = ["hard"]\nseeds = [0, 1]\nsteps = 10\ntargets = [0.5]\n'
        'uniform = ["grpo-n4"]\noracles = ["oracle-both"]\n[[claim]]\nfigure = "C1"\narm = "mopps"\n'
    )
    with pytest.raises(SystemExit, match="not registered"):
        ctt.main(["--pools", "nowhere", "--here", "--prereg", str(prereg)])
    from tests.test_compute import pool

    comp = compute.summarize(pool({"grpo-n4": {"steps": 400}, "mopps": {"tokens": 50.0}}), [], ("grpo-n4",), ())
    table = ctt.markdown_table({"by_pool": {"hard": {"compute": comp}}})
    assert "| mopps | 2.00 [2.00, 2.00]" in table and "grpo-n4 (best uniform on hard)" in table
    # the opening table: pools side by side, an arm one pool lacks is a dash, the headlines below with their arm
    only_n4 = compute.summarize(pool({"grpo-n4": {"steps": 400}}), [], ("grpo-n4",), ())
    c1 = {"value": 2.0, "t_lo": 1.5, "t_hi": 2.5, "arm": "mopps", "preregistration": {"preregistered": True}}
    opening = ctt.opening_table(
        {
            "hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C1": c1}}}},
            "small": {"by_pool": {"small": {"compute": only_n4}}},
        }
    )
    lines = opening.splitlines()
    assert lines[0] == "| arm | hard: tokens | hard: CPU / GPU-model | small: tokens | small: CPU / GPU-model |"
    assert next(ln for ln in lines if ln.startswith("| mopps |")).endswith("| — | — |")
    assert "| grpo-n4 (best uniform: hard; best uniform: small) |" in opening
    assert "| C1 | 2.00 [1.50, 2.50] (mopps) | — |" in opening
    # a headline with no value (no seed reached a target) is a dash, not a crash
    c1["value"] = None
    assert "| C1 | — |" in ctt.opening_table(
        {"hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C1": c1}}}}}
    )
    # C3 is a share of the oracle's gain: where C0's interval holds 1 there is no gain to share, and the cell says so
    c0 = {"value": 1.06, "t_lo": 0.92, "t_hi": 1.22, "arm": "oracle-alloc"}
    c3 = {"value": 0.5, "arm": "mopps", "preregistration": {"preregistered": True}}
    heads = {"hard": {"by_pool": {"hard": {"compute": comp}}, "compute": {"by_pool": {"hard": {"C0": c0, "C3": c3}}}}}
    assert "| C3 | 0.50 (mopps) (C0's interval holds 1: no ceiling gain to share) |" in ctt.opening_table(heads)
    c0["t_lo"] = 1.1
    assert "| C3 | 0.50 (mopps) |" in ctt.opening_table(heads)


@pytest.mark.slow
def test_compare_end_to_end_with_a_preregistration_and_resumable_records(tmp_path, monkeypatch):
    import gzip
    import subprocess

    monkeypatch.chdir(tmp_path)  # the run's pools and run folders go under runs/compare of the working directory

    from reinforce_ada.bench.compute import TARGETS

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    reg = tmp_path / "prereg.toml"
    reg.write_text(
        f'version = 1\n[instrument]\npools = ["small"]\nseeds = [0, 1]\nsteps = 4\ntargets = {list(TARGETS)}\n'
        'uniform = ["grpo-n2", "grpo-n4"]\noracles = ["oracle-select"]\n'
        '[[claim]]\nfigure = "C1"\narm = "oracle-select"\n[[claim]]\nfigure = "C0"\narm = "oracle"\n'
    )
    git("add", "prereg.toml")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "prereg")
    argv = ["compare", "--arms", "grpo-n4,grpo-n2,oracle-select", "--pool", "small", "--steps", "4"]
    argv += ["--seeds", "2", "--other-seeds", "2", "--sweep-seeds", "1", "--lrs", "2e-4", "--sweep-each-pool"]
    argv += ["--preregistration", str(reg), "--records", str(tmp_path / "rec"), "--out", str(tmp_path / "out")]
    argv += ["--long-arms", "grpo-n4,grpo-n2"]
    assert main(argv) == 0
    res = json.loads((tmp_path / "out.json").read_text())
    heads = res["compute"]["by_pool"]["small"]
    assert heads["C1"]["arm"] == "oracle-select" and heads["C1"]["preregistration"]["preregistered"]
    assert heads["C0"]["preregistration"]["preregistered"]
    assert not heads["C2"]["preregistration"]["preregistered"]  # registered for no arm
    assert res["compute"]["preregistration"]["committed"]
    runs = res["runs"]["main"]
    assert {r["steps"] for r in runs if r["arm"] == "grpo-n2"} == {8} and "time_step_s" not in runs[0]
    assert len(runs[0]["eval_gpu_s"]) == len(runs[0]["eval_step"])
    records = sorted((tmp_path / "rec").glob("*.json.gz"))
    assert len(records) == 3 + 6  # sweep: 3 arms x 1 lr x 1 seed; main: 3 arms x 2 seeds
    with gzip.open(records[0], "rt") as f:
        assert "accuracy" in json.load(f)
    assert main(argv) == 0  # a second run reuses every record
    # a report on a run not finished: run nothing, read what the records hold (here: one main run removed)
    newest = max((tmp_path / "rec").glob("*.json.gz"), key=lambda f: f.stat().st_mtime)
    newest.unlink()
    src = Path(__file__).resolve().parents[1] / "src" / "reinforce_ada"
    assert main([*argv, "--report-only", "--fingerprint-of", str(src)]) == 0
    part = json.loads((tmp_path / "out.json").read_text())
    assert len(part["runs"]["main"]) == 5 and not (tmp_path / "rec" / newest.name).exists()


def test_an_arm_may_set_the_learner_and_its_records_are_keyed_by_it(tmp_path):
    from reinforce_ada.bench.run import train_config

    arms, skipped = resolve_arms(["grpo-n4", "grpo-n4-2ep", "x=uniform:n=2 | optim.minibatches=2, optim.clip_high=0.3"])
    by = {a.name: a for a in arms}
    assert not skipped and by["grpo-n4"].train == ()
    assert by["grpo-n4-2ep"].train == (("optim.epochs", 2),) and by["grpo-n4-2ep"].cfg.n == 4
    assert by["x"].train == (("optim.clip_high", 0.3), ("optim.minibatches", 2))
    for spec, match in [
        ("uniform | optim.lr=1e-4", "lr sweep"),
        ("uniform | run.steps=3", "optim.KEY=VALUE"),
        ("uniform | optim.epoch=2", "unknown key optim.epoch"),
        ("uniform | optim.epochs=0", "epochs"),
        ("uniform |", "nothing after"),
    ]:
        with pytest.raises(ConfigError, match=match):
            resolve_arms(["grpo-n4", f"bad={spec}"])
    job = Job("p", "x", by["x"].cfg, 1e-4, 0, 1, 4, 1, "m", "t", "e", None, str(tmp_path), train=by["x"].train)
    cfg = train_config(job)
    assert cfg.optim.minibatches == 2 and cfg.optim.clip_high == 0.3 and cfg.optim.lr == 1e-4
    plain = dataclasses.replace(job, train=())
    paths = {bench_jobs._record_path(tmp_path, j, "code") for j in (job, plain)}
    assert len(paths) == 2  # the learner setting is part of the record's key
    from reinforce_ada.sampling.configure import strategy_config

    older = {
        "job": [f.name for f in dataclasses.fields(Job) if f.name != "train"],
        "strategy": strategy_config().to_dict(),
        "all_fields": False,
    }
    assert bench_jobs._record_path(tmp_path, job, "code", schema=older) is None  # older code could not run it
    assert bench_jobs._record_path(tmp_path, plain, "code", schema=older) == bench_jobs._record_path(
        tmp_path, plain, "code"
    )  # an arm without learner settings keeps the key it had before the field existed
