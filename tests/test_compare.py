"""`reinforce-ada compare`: arms table, pools, one exact-evaluated run, goals from synthetic runs, summary merging."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from benchmarks.harness import update_summary
from reinforce_ada.bench import analysis
from reinforce_ada.bench import jobs as bench_jobs
from reinforce_ada.bench.arms import ARMS, matched_n, resolve_arms, split_arms
from reinforce_ada.bench.compare import CompareConfig, plan_jobs
from reinforce_ada.bench.run import Job, eval_steps, run_job
from reinforce_ada.bench.testbed import build_pool, level_shares, parse_pool
from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.simulation.plan import plan
from tests.helpers import bench_job


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


def three_arms(seeds: int = 5) -> list[dict]:
    """GRPO-n4, Seq-balanced (2x its speed per step) and the matched arm (1.6x) over `seeds` seeds."""
    recs = []
    for s in range(seeds):
        recs += [
            record("grpo-n4", s, 1.0, 400, 100, 0.6 + 0.01 * s, 0.05),
            record("seq-bal", s, 2.0, 200, 500, 0.12, 0.1),
            record("grpo-matched", s, 1.6, 200, 500, 0.3, 0.2),
        ]
    return recs


def test_table_from_synthetic_runs_with_known_factors():
    recs = three_arms()
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


def test_a_compact_record_reads_as_its_full_record():
    """A study's records file keeps a run's series reduced to what the table reads (`analysis.head_stat`): the same
    table comes out."""
    recs = [
        record(a, s, k, n, 100 * k, 0.3 + 0.01 * s, 0.05 * k)
        for s in range(3)
        for a, k, n in (("grpo-n4", 1.0, 400), ("seq-bal", 2.0, 200))
    ]
    compact = []
    for r in recs:
        c = {
            k: v
            for k, v in r.items()
            if k
            not in (
                "no_signal_share",
                "zero_adv_share",
                "samples_per_step",
                "tokens_per_step",
                "time_step_s",
                "time_generate_s",
                "time_train_s",
            )
        }
        c["head"] = {
            "steps": 200,
            "mean": {
                k: analysis.head_stat(r, k, 200, "mean")
                for k in ("no_signal_share", "samples_per_step", "tokens_per_step")
            },
            "nanmean": {"zero_adv_share": analysis.head_stat(r, "zero_adv_share", 200, "nanmean")},
            "median": {
                k: analysis.head_stat(r, k, 200, "median") for k in ("time_step_s", "time_generate_s", "time_train_s")
            },
        }
        compact.append(c)
    assert analysis.summarize_pool(compact, "grpo-n4", None, 200) == analysis.summarize_pool(recs, "grpo-n4", None, 200)
    with pytest.raises(KeyError, match="first 100 steps"):
        analysis.summarize_pool(compact, "grpo-n4", None, 100)


def test_lr_choice_by_curve_area():
    recs = [record("seq-bal", 1000, k, 200, 500, 0.1, 0.1, lr=lr) for k, lr in ((1.0, 2e-4), (1.5, 4e-4), (1.2, 8e-4))]
    choice = analysis.choose_lrs(recs, 200)["seq-bal"]
    assert (
        choice["best"] == 4e-4 and not choice["at_edge"] and set(choice["area_gain"]) == {"0.0002", "0.0004", "0.0008"}
    )


def test_the_lr_grid_grows_past_an_edge_exactly_as_the_registered_studies_planned():
    """`compare`'s sweep and `studies.protocol.jobrunner` grow grids with this one function; a registered study's job
    keys read the grown grid in its order (sorted, the new lr last; an untouched grid keeps its own order)."""
    grids = {"hard": {"a": (4e-4, 1e-4, 2e-4), "b": (2e-4, 1e-4), "c": (3e-4, 1e-4)}, "small": {"a": (1e-4, 2e-4)}}
    choice = {
        "hard": {"a": {"best": 4e-4, "at_edge": True}, "b": {"best": 1e-4, "at_edge": True}, "c": {"at_edge": False}},
        "small": {"a": {"best": 2e-4, "at_edge": False}},
    }
    grown, said = analysis.grow_grid(grids, choice)
    assert grown == {
        "hard": {"a": (1e-4, 2e-4, 4e-4, 8e-4), "b": (1e-4, 2e-4, 5e-5), "c": (3e-4, 1e-4)},
        "small": {"a": (1e-4, 2e-4)},
    }
    assert said == ["hard/a +0.0008", "hard/b +5e-05"] and grids["hard"]["a"] == (4e-4, 1e-4, 2e-4)  # input kept
    assert analysis.grow_grid(grids, choice, may_grow=False) == (grids, [])  # the last round grows nothing


def test_arms_table_skips_specs_that_do_not_parse_yet_and_a_users_bad_spec_is_an_error(monkeypatch):
    from reinforce_ada.bench import arms as arms_module

    monkeypatch.setitem(arms_module.ARMS, "future", "uniform:nope=1")  # a table arm this version cannot parse
    arms, skipped = resolve_arms(["grpo-n4", "seq-bal", "mine=seq:exit=positive,k_pos=2", "future"])
    assert [a.name for a in arms] == ["grpo-n4", "seq-bal", "mine"]
    assert arms[2].cfg.options.k_pos == 2 and "nope" in skipped["future"]
    with pytest.raises(ConfigError, match=r"arm 'x=spo:select=bogus': select='bogus' is not valid"):
        resolve_arms(["grpo-n4", "x=spo:select=bogus"])  # written by the user: hours of runs must not start
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
    job = bench_job(pool, model_dir, tmp_path / "run", "grpo-n4", parse_arm("uniform:n=2"), check_samples=2)
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
    matched = {j.strategy.options.n for j in main_jobs if j.arm == "grpo-matched"}
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


def test_an_edited_record_is_refused_and_an_older_one_is_counted(tmp_path, monkeypatch):
    """A record carries the digest of its content: one edited by hand (an accuracy set to 1.0) is an error naming the
    file when a report or a resume reads it, not a result; one written before records had a digest is read and
    counted in the log."""
    import gzip

    monkeypatch.setattr(
        bench_jobs,
        "run_job",
        lambda job: {
            "key": job.key,
            "accuracy": [0.1, 0.2],
            "steps": 1,
            "samples_per_step": [4.0],
            "seconds": {"total": 0},
        },
    )
    job = Job("p", "a", parse_arm("uniform"), 1e-4, 0, 1, 4, 1, "m", "t", "e", None, str(tmp_path / "a"))
    logs = []
    (rec,) = bench_jobs.run_jobs([job], 1, logs.append, tmp_path / "rec", "code")
    (path,) = (tmp_path / "rec").glob("*.json.gz")
    with gzip.open(path, "rt") as f:
        stored = json.load(f)
    assert stored.pop("digest") and stored == rec and "digest" not in rec
    with gzip.open(path, "wt") as f:
        json.dump({**stored, "accuracy": [0.1, 1.0], "digest": bench_jobs._digest(rec)}, f)
    with pytest.raises(ConfigError, match=rf"{path.name}: its content does not match its digest .*delete it"):
        bench_jobs.run_jobs([job], 1, logs.append, tmp_path / "rec", "code", only_cached=True)
    with gzip.open(path, "wt") as f:
        json.dump(stored, f)  # as older code wrote it: no digest
    assert bench_jobs.run_jobs([job], 1, logs.append, tmp_path / "rec", "code", only_cached=True) == [rec]
    assert any("1 of them carry no digest" in line for line in logs)
    path.write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match="not a readable gzip'd JSON record"):
        bench_jobs.run_jobs([job], 1, logs.append, tmp_path / "rec", "code", only_cached=True)


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
        (["compare", "--extend-sweep", "-1"], "extend_sweep"),
        (["compare", "--arms", "grpo-n4;x=spo | run.batch_sise=64"], "run.batch_sise is not a setting (did you mean "),
        (["compare", "--arms", "grpo-n4;x=spo | run.steps=3"], "run.steps cannot differ between arms"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err


def test_the_headline_arm_is_one_that_runs():
    from reinforce_ada.cli.compare import compare_config
    from reinforce_ada.cli.main import build_parser, parse

    def headline(*flags):
        argv = ["compare", *flags]
        return compare_config(parse(build_parser(argv), argv)).compute_arm

    assert headline() == "mopps"  # the default arms include it
    assert headline("--arms", "grpo-n4;spo64u=spo:select=none | run.batch_size=64") == "spo64u"
    assert headline("--arms", "grpo-n4,seq-bal,mopps") == "mopps"
    assert headline("--arms", "grpo-n4,spo-64-uniform,spo-64") == "spo-64-uniform"  # the study's arms, by name
    for plain in ("grpo-matched", "iw-oracle", "grpo-n4-2ep", "g8=uniform:n=8"):  # uniform, oracle, learner control
        assert headline("--arms", f"grpo-n4;{plain};seq-bal") == "seq-bal"
    assert headline("--arms", "grpo-n4,seq-bal,mopps", "--compute-arm", "seq-bal") == "seq-bal"
    with pytest.raises(ConfigError, match=r"--compute-arm est: not one of the arms run \(grpo-n4, seq-bal\)"):
        headline("--arms", "grpo-n4,seq-bal", "--compute-arm", "est")


def test_an_arm_may_set_the_learner_and_its_records_are_keyed_by_it(tmp_path):
    from reinforce_ada.bench.run import train_config

    arms, skipped = resolve_arms(["grpo-n4", "grpo-n4-2ep", "x=uniform:n=2 | optim.minibatches=2, optim.clip_high=0.3"])
    by = {a.name: a for a in arms}
    assert not skipped and by["grpo-n4"].train == ()
    assert by["grpo-n4-2ep"].train == (("optim.epochs", 2),) and by["grpo-n4-2ep"].cfg.options.n == 4
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


@pytest.mark.parametrize("lrs", [(float("nan"),), ("1e-4",), (2.0,), (0.0,), ()])
def test_a_learning_rate_that_cannot_train_is_refused(lrs):
    """A registration's lr of NaN (or text, or past optim.lr's range) was accepted and ran as NaN."""
    with pytest.raises(ConfigError, match="every lr a number in"):
        CompareConfig(lrs=lrs)
    with pytest.raises(ConfigError, match=r"every lr .*got \[nan\]"):
        CompareConfig(fixed_lrs=(("grpo-n4", float("nan")),))


def test_records_of_an_older_options_based_copy_are_keyed_by_the_options_it_has(tmp_path):
    """`--fingerprint-of` a 0.4-style copy that lacks options added since (`forgetting`, ...): a job leaving them at
    their defaults is keyed as that copy keyed it (its own options of the job's strategy); a job setting one, or of a
    strategy that copy lacks, could not have run there (None). Keyed by the default strategy's options, the registered
    fewer-samples study matched 0 of its 593 planned runs."""
    from reinforce_ada.sampling.configure import strategy_config

    added = ("forgetting", "drift_half", "rho_min", "rho_max")
    strategies = {
        n: {k: v for k, v in strategy_config(n).to_dict().items() if k not in added} for n in ("uniform", "seq")
    }
    older = {"job": [f.name for f in dataclasses.fields(Job)], "strategy": strategies["seq"], "all_fields": 0}
    older["strategies"] = strategies

    def job(spec):
        return Job("p", "a", parse_arm(spec), 1e-4, 0, 1, 4, 1, "m", "t", "e", None, str(tmp_path))

    plain = bench_jobs._record_path(tmp_path, job("uniform"), "code", schema=older)
    assert plain is not None and plain != bench_jobs._record_path(tmp_path, job("uniform"), "code")
    assert plain == bench_jobs._record_path(tmp_path, job("uniform:select=none"), "code", schema=older)
    assert bench_jobs._record_path(tmp_path, job("uniform:forgetting=drift"), "code", schema=older) is None
    assert bench_jobs._record_path(tmp_path, job("spo"), "code", schema=older) is None
    full = {**older, "strategies": {n: strategy_config(n).to_dict() for n in ("uniform", "seq")}}
    assert bench_jobs._record_path(tmp_path, job("uniform"), "code", schema=full) == bench_jobs._record_path(
        tmp_path, job("uniform"), "code"
    )
