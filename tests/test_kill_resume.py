"""Kill and resume repeat the uninterrupted run, for every strategy family, with trackers on.

Quick: a run that dies mid-step (an exception from inside the step, after a checkpoint and later metric lines) and is
resumed in a new `Trainer` writes the uninterrupted run's metrics, every family, TensorBoard on. Slow: the CLI killed
with SIGKILL at a random point (a random step, then a random delay: mid-step, mid-checkpoint or mid-log), then
`--resume`, with TensorBoard and each installed tracker (trackio, MLflow; W&B when installed, offline), writes the
uninterrupted run's metrics bit for bit, TensorBoard's events hold them, and the tracker runs continue."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import switch
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.training.config import load_toml, to_toml
from reinforce_ada.training.tracking import read_metrics
from reinforce_ada.training.trainer import Trainer
from tests.helpers import train_config

FAMILIES = {
    "uniform": {"n": 4},
    "seq": {},
    "est": {},
    "spo": {},
    "greso": {},  # dynamic sampling behind GRESO's skip rule
    "mopps": {},
    "pilot_commit": {},
    "knapsack": {},
    "conformal": {},
}
"""One arm per strategy family, on its defaults (`uniform` at n=4)."""
TRACKERS = ["tensorboard", *(n for n in ("trackio", "mlflow", "wandb") if importlib.util.find_spec(n) is not None)]


def same_run(a: list[dict], b: list[dict]) -> None:
    """Every metric of every step equal, the wall-clock times aside."""
    assert [m["step"] for m in b] == [m["step"] for m in a]
    for x, y in zip(a, b, strict=True):
        assert {k: v for k, v in x.items() if not k.startswith("time_")} == {
            k: v for k, v in y.items() if not k.startswith("time_")
        }


class Died(Exception):
    """A crash in the middle of a step."""


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_run_that_dies_mid_step_resumes_to_the_uninterrupted_run(model_dir, tmp_path, family):
    def cfg(run: Path):
        c = train_config(model_dir, run, run={"steps": 5, "save_every": 2, "eval_every": 2})
        return dataclasses.replace(c, strategy=switch(c.strategy, family, **FAMILIES[family]))

    Trainer(cfg(tmp_path / "ref"), tensorboard=True).fit()
    dies = Trainer(cfg(tmp_path / "k"), tensorboard=True)

    def crash(trainer, batch):  # in step 4, after the checkpoint of step 2 and the metric line of step 3
        if trainer.step == 3:
            raise Died
        return {}

    dies.probes.append(crash)
    with pytest.raises(Died):
        dies.fit()
    assert [m["step"] for m in read_metrics(tmp_path / "k")] == [0, 1, 2, 3]
    again = Trainer(cfg(tmp_path / "k"), tensorboard=True)
    assert again.resume() and again.step == 2
    again.fit()
    same_run(read_metrics(tmp_path / "ref"), read_metrics(tmp_path / "k"))


def _cli(args: list[str], env: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "reinforce_ada.cli", "train", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sigkill_at_a_random_point_then_resume_repeats_the_run_with_trackers_on(model_dir, tmp_path, family):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONHASHSEED": "0", "TRACKIO_DIR": str(tmp_path / "trackio"), "WANDB_MODE": "offline"}
    env |= {"WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true", "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("MLFLOW_TRACKING_URI", None)
    common = ["--model.path", str(model_dir), "--model.threads", "1", "--task.train_size", "128"]
    common += ["--task.eval_size", "2", "--generation.max_new_tokens", "4", "--batch-size", "4", "--steps", "10"]
    common += ["--eval-every", "4", "--save-every", "3", "--run.progress", "false", "--optim.warmup_steps", "2"]
    common += ["--strategy", family, *(x for k, v in FAMILIES[family].items() for x in (f"--{k}", str(v)))]
    common += ["--run.report_to", ",".join(TRACKERS)]
    ref = _cli([*common, "--run-dir", str(tmp_path / "ref")], env)
    assert ref.wait(timeout=300) == 0, ref.stderr.read()[-3000:]

    run = tmp_path / "k"
    killed = _cli([*common, "--run-dir", str(run)], env)
    lines, delay = rng.randint(2, 10), rng.uniform(0.0, 0.3)  # after the line of a random step, a random delay more
    deadline = time.time() + 240
    while time.time() < deadline and killed.poll() is None:
        if (run / "metrics.jsonl").exists() and len((run / "metrics.jsonl").read_bytes().splitlines()) >= lines:
            break
        time.sleep(0.005)
    time.sleep(delay)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    resumed = _cli(["--resume", str(run), "--run.progress", "false"], env)
    err = resumed.communicate(timeout=300)[1]
    note = f"(random seed {seed}: killed after {lines} lines + {delay:.3f} s)"
    assert resumed.returncode == 0, f"{note}\n{err[-3000:]}"
    assert "warning: tracker" not in err, note
    a, b = read_metrics(tmp_path / "ref"), read_metrics(run)
    same_run(a, b)

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = EventAccumulator(str(run / "tensorboard"))
    tb.Reload()  # steps logged again after the kill replace the killed process's (TensorBoard purges them)
    loss = {e.step: e.value for e in tb.Scalars("train/loss")}
    assert loss == pytest.approx({m["step"]: m["loss"] for m in b if "loss" in m}, rel=1e-6), note
    state = json.loads((run / "trackers.json").read_text())
    if "mlflow" in TRACKERS:
        assert state["mlflow"]["store"] == "mlruns" and len(list((run / "mlruns").glob("*/*/meta.yaml"))) == 1


# -- legacy resume ----------------------------------------------------------------------------------------------------
# Run folders written by 0.3 (one flat StrategyConfig of every strategy's fields, replay under [strategy], GRESO's
# admission counters by GRESO's name) still load: their config.toml reads as the new config and their strategy state
# loads and round-trips. The fixtures are the config.toml and the strategy state of real 0.3 runs (commit 08d0636,
# `reinforce-ada train ... --steps 4 --save-every 2`), their weights left out; resuming those runs to step 6 with this
# code gave the same metrics as resuming them with 0.3 (see the closing note of issue 38).
FIXTURES = Path(__file__).parent / "fixtures" / "v0_3"


def legacy(name: str) -> tuple[object, dict]:
    cfg = load_toml(FIXTURES / name / "config.toml")
    state = json.loads((FIXTURES / name / "strategy_state.json").read_text())
    return cfg, state


@pytest.mark.parametrize(
    "name, strategy, select, replay",
    [("seq", "seq", "none", False), ("greso_replay", "uniform", "greso", True), ("iw", "uniform", "iw", False)],
)
def test_a_03_config_toml_reads_as_the_new_config(name, strategy, select, replay, tmp_path):
    cfg, _ = legacy(name)
    assert (cfg.strategy.name, cfg.strategy.options.select, cfg.replay.enabled) == (strategy, select, replay)
    (tmp_path / "c.toml").write_text(to_toml(cfg))  # and it is written back in the new form, read the same
    assert load_toml(tmp_path / "c.toml") == cfg
    assert "replay" not in (tmp_path / "c.toml").read_text().split("[model]")[0]  # not under [strategy] any more


@pytest.mark.parametrize("name", ["seq", "greso_replay", "iw"])
def test_a_03_strategy_state_loads_and_round_trips(name):
    cfg, state = legacy(name)
    strategy = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    strategy.load_state_dict(state["strategy"])
    saved = json.loads(json.dumps(strategy.state_dict()))
    twin = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    twin.load_state_dict(saved)
    assert json.dumps(twin.state_dict(), sort_keys=True) == json.dumps(saved, sort_keys=True)
    old = state["strategy"]
    assert saved["pools"] == old["pools"] and saved["rng"] == old["rng"]
    assert {k: saved["memory"][k] for k in old["memory"]} == old["memory"]  # newer keys (levels) start empty
    if "admission" in old:  # the admission stage's own state carries over, its rule's included
        a, b = saved["admission"], old["admission"]
        assert a["rng"] == b["rng"] and a["offered"] == b["offered"] and a["need"] == b["need"]
        rule = {"greso_replay": "greso", "iw": "iw_raw"}[name]
        assert rule in a and (rule != "greso" or {k: a["greso"][k] for k in b["greso"]} == b["greso"])
        assert a["counts"]["skipped_rule"] == b["counts"]["skipped_greso"]


# -- 0.4: every shared option of every rule and mode listed under [strategy] ------------------------------------------
FIXTURES_04 = Path(__file__).parent / "fixtures" / "v0_4"


@pytest.mark.parametrize("name", ["spo", "iw_drift"])
def test_a_04_run_folder_reads_its_features_options_and_its_state_round_trips(name, tmp_path):
    """0.4 wrote all 33 shared options (iw_mix, drift_half, ...) whatever `select` and `forgetting` were. The options
    of a feature that is on load with their values; those of a feature that is off are ignored at their defaults.
    Fixtures: the config.toml and strategy state (step 4) of `reinforce-ada train --strategy spo` and `--strategy
    uniform --select iw --iw-mix 0.3 --estimator both --forgetting drift --drift-half 0.1` (`--steps 4 --save-every 2
    --batch-size 8`) run with commit 0d89033; resuming both to step 6 with this code gave metrics identical to 0.4's
    (timings aside)."""
    cfg = load_toml(FIXTURES_04 / name / "config.toml")
    o = cfg.strategy.options
    if name == "iw_drift":
        assert (o.select, o.iw_mix, o.forgetting, o.drift_half, o.estimator, o.predictor_dim) == (
            "iw",
            0.3,
            "drift",
            0.1,
            "both",
            4096,
        )
        assert not hasattr(o, "priority_eps") and not hasattr(o, "target")  # the rules that are off
    else:
        assert (o.select, o.candidates, o.priority_eps) == ("priority", 16, 0.05) and not hasattr(o, "iw_mix")
    (tmp_path / "c.toml").write_text(to_toml(cfg))  # written back in the new form, read the same
    assert load_toml(tmp_path / "c.toml") == cfg
    assert "iw_mix" not in (tmp_path / "c.toml").read_text() or name == "iw_drift"
    state = json.loads((FIXTURES_04 / name / "strategy_state.json").read_text())
    strategy = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    strategy.load_state_dict(state["strategy"])
    assert json.loads(json.dumps(strategy.state_dict())) == state["strategy"]


def test_a_04_feature_option_set_without_its_feature_is_named(tmp_path):
    text = (FIXTURES_04 / "spo" / "config.toml").read_text().replace("iw_mix = 0.2", "iw_mix = 0.3")
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"iw_mix \(an option of select=iw\)"):
        load_toml(tmp_path / "config.toml")


def test_a_benchmark_run_that_raises_stops_no_other_and_only_it_runs_again(tmp_path, monkeypatch):
    """`bench.jobs.run_jobs`: a job that raises is logged with its traceback, the others finish and keep their
    records, and the call ends with `RunsFailed` naming it; the same call again runs only it. With worker processes
    too (two jobs whose model does not exist): the loop goes on past the first failure."""
    from reinforce_ada.bench import jobs as bench_jobs
    from reinforce_ada.bench.run import Job
    from reinforce_ada.sampling.configure import parse_arm

    calls = []

    def fake_run(job):
        calls.append(job.arm)
        if job.arm == "b":
            raise ValueError("diverged at step 7")
        return {"key": job.key, "accuracy": [0.1, 0.2], "samples_per_step": [4.0], "steps": 1, "seconds": {"total": 0}}

    def job(arm, model="m"):
        return Job("p", arm, parse_arm("uniform"), 1e-4, 0, 1, 4, 1, model, "t", "e", None, str(tmp_path / arm))

    monkeypatch.setattr(bench_jobs, "run_job", fake_run)
    logs, jobs = [], [job("a"), job("b"), job("c")]
    with pytest.raises(bench_jobs.RunsFailed, match=r"1 of 3 runs failed: .*/b/.*ValueError: diverged at step 7") as e:
        bench_jobs.run_jobs(jobs, 1, logs.append, tmp_path / "rec", "code")
    assert (
        isinstance(e.value, ConfigError) and calls == ["a", "b", "c"] and len(list((tmp_path / "rec").iterdir())) == 2
    )
    assert any(line.startswith("FAILED main/p/b/") and "Traceback" in line for line in logs)
    with pytest.raises(bench_jobs.RunsFailed):
        bench_jobs.run_jobs(jobs, 1, logs.append, tmp_path / "rec", "code")
    assert calls == ["a", "b", "c", "b"]
    monkeypatch.undo()
    missing = [job(x, str(tmp_path / "no-model")) for x in ("d", "e")]
    with pytest.raises(bench_jobs.RunsFailed, match="2 of 2 runs failed"):
        bench_jobs.run_jobs(missing, 2, logs.append, tmp_path / "rec2", "code")
