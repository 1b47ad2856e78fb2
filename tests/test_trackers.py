"""`run.report_to`: the trackers beside metrics.jsonl (`training.trackers`, `training.tracking.Tracker`).

A recording tracker (registered in `SINKS` for the test) shows the contract: TensorBoard's names, the config once,
samples as a table, the same tracker run after a resume, and a failing tracker switched off with the JSONL intact.
Then a short run logged to every installed tracker offline, read back from each tracker's own files (slow)."""

from __future__ import annotations

import glob
import json
import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.training import trackers
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.report import make_report
from reinforce_ada.training.trackers import parse_report_to
from reinforce_ada.training.tracking import STATE_FILE, Tracker, read_metrics, tb_tag
from reinforce_ada.training.trainer import Trainer


class Recorder:
    """A tracker that keeps what it was given; `fail_at` makes `log` raise at that step."""

    made: list[tuple[dict, dict | None]] = []
    logged: list[tuple[int, dict]] = []
    tables: list[tuple[int, list]] = []
    fail_at: int | None = None

    def __init__(self, run_dir, config, resume):
        Recorder.made.append((config, resume))
        self.state = {"id": resume["id"] if resume else f"run-{len(Recorder.made)}"}

    def log(self, step, scalars):
        if step == Recorder.fail_at:
            raise ConnectionError("tracker server gone")
        Recorder.logged.append((step, scalars))

    def table(self, step, rows):
        Recorder.tables.append((step, rows))

    def close(self): ...


@pytest.fixture
def recorder(monkeypatch):
    monkeypatch.setitem(trackers.SINKS, "recorder", Recorder)
    Recorder.made, Recorder.logged, Recorder.tables, Recorder.fail_at = [], [], [], None
    return Recorder


def test_report_to_names_and_errors(monkeypatch):
    assert parse_report_to("tensorboard, tensorboard") == ("tensorboard",)
    assert parse_report_to("none") == () == parse_report_to("")
    with pytest.raises(ConfigError, match=r"run.report_to='neptune'.*unknown tracker 'neptune'.*\['mlflow'"):
        parse_report_to("neptune")
    real = __import__("importlib").util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"wandb is not installed here: pip install 'reinforce-ada\[wandb\]'"):
        parse_report_to("tensorboard,wandb")


def test_a_tracker_gets_tensorboards_names_the_config_once_samples_and_the_same_run_on_resume(tmp_path, recorder):
    (tmp_path / "samples.jsonl").write_text(json.dumps({"step": 1, "prompt": "1+2=", "reward": 1.0}) + "\n")
    t = Tracker(tmp_path, report_to="recorder", config={"run": {"steps": 2}})
    t.log({"step": 0, "eval_accuracy": 0.25, "eval_pass@4": 0.5})
    t.log({"step": 1, "loss": 0.5, "time_step_s": 2, "active_prompts_per_round": [4, 2], "entropy": float("nan")})
    t.close()
    assert recorder.made == [({"run": {"steps": 2}}, None)]
    assert recorder.logged == [
        (0, {"eval/eval_accuracy": 0.25, "eval/eval_pass@4": 0.5}),
        (1, {"train/loss": 0.5, "time/time_step_s": 2.0}),  # numbers only, finite only: what TensorBoard gets
    ]
    assert recorder.tables == [(1, [{"step": 1, "prompt": "1+2=", "reward": 1.0}])]
    assert json.loads((tmp_path / STATE_FILE).read_text()) == {"recorder": {"id": "run-1", "folder": str(tmp_path)}}
    resumed = Tracker(tmp_path, report_to="recorder", config={"run": {"steps": 3}})
    resumed.log({"step": 2, "loss": 0.25})
    assert recorder.made[1] == ({"run": {"steps": 3}}, {"id": "run-1"})  # the sink is told to continue run-1
    assert recorder.logged[-1] == (2, {"train/loss": 0.25})


def test_a_tracker_failing_mid_run_is_switched_off_and_metrics_jsonl_keeps_everything(tmp_path, recorder, capsys):
    recorder.fail_at = 2
    t = Tracker(tmp_path, report_to="tensorboard,recorder")
    for step in range(4):
        t.log({"step": step, "loss": float(step)})
    t.close()
    err = capsys.readouterr().err
    assert err.count("warning: tracker recorder failed (log) (ConnectionError: tracker server gone)") == 1
    assert "metrics.jsonl keeps every metric" in err
    assert [s for s, _ in recorder.logged] == [0, 1]
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1, 2, 3]
    assert (tmp_path / "tensorboard").is_dir()


def test_a_tracker_that_cannot_start_leaves_the_run_alone(tmp_path, recorder, monkeypatch, capsys):
    def broken(*a):
        raise RuntimeError("no api key configured")

    monkeypatch.setitem(trackers.SINKS, "broken", broken)
    t = Tracker(tmp_path, report_to="broken,recorder")
    t.log({"step": 0, "loss": 1.0})
    t.log({"step": 1, "loss": 2.0})
    assert "tracker broken could not start (RuntimeError: no api key configured)" in capsys.readouterr().err
    assert [s for s, _ in recorder.logged] == [0, 1] and len(read_metrics(tmp_path)) == 2


def test_a_bad_report_to_fails_before_the_model_loads(tmp_path, monkeypatch):
    from reinforce_ada.training import trainer
    from tests.helpers import train_config

    def no_load(*a, **kw):
        raise AssertionError("the model was loaded before report_to was checked")

    monkeypatch.setattr(trainer, "load_policy", no_load)
    cfg = train_config(tmp_path / "model", tmp_path / "run", run={"report_to": "tensorboard,neptune"})
    with pytest.raises(ConfigError, match="unknown tracker 'neptune'"):
        trainer.Trainer(cfg)


# -- a short run to every installed tracker, read back from their own files -------------------------------------
INSTALLED = [n for n in ("wandb", "mlflow", "trackio") if __import__("importlib").util.find_spec(n) is not None]


def wandb_history(root: Path) -> dict[str, list[dict]]:
    """run id -> the history rows of W&B's offline `.wandb` files (a LevelDB-style log of protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    runs: dict[str, list[dict]] = {}
    for f in sorted(glob.glob(str(root / "wandb" / "offline-run-*" / "run-*.wandb"))):
        raw, pos, buf, records = Path(f).read_bytes(), 7, b"", []
        while pos + 7 <= len(raw):
            if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
                pos += 32768 - pos % 32768
                continue
            _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
            data, pos = raw[pos + 7 : pos + 7 + length], pos + 7 + length
            if kind in (1, 4):
                records.append(buf + data)
                buf = b""
            elif kind in (2, 3):
                buf += data
        rows = []
        for data in records:
            r = pb.Record()
            r.ParseFromString(data)
            if r.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
        runs.setdefault(Path(f).stem.removeprefix("run-"), []).extend(rows)
    return runs


def mlflow_metric(run_dir: Path, run_id: str, name: str) -> dict[int, float]:
    (path,) = glob.glob(str(run_dir / "mlruns" / "*" / run_id / "metrics" / name))
    return {int(step): float(v) for _, v, step in (ln.split() for ln in Path(path).read_text().splitlines())}


@pytest.mark.slow
@pytest.mark.skipif(not INSTALLED, reason="no tracker extra installed (wandb, mlflow, trackio)")
def test_a_short_run_reaches_every_installed_tracker_offline_and_resumes_the_same_tracker_run(model_dir, tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}
    env.update(TRACKIO_DIR=str(tmp_path / "trackio"), PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("MLFLOW_TRACKING_URI", None)
    report_to = ",".join(["tensorboard", *INSTALLED])
    base = [sys.executable, "-m", "reinforce_ada", "train", "--model.path", str(model_dir), "--batch-size", "2"]
    base += ["--task.train_size", "16", "--task.eval_size", "1", "--generation.max_new_tokens", "4"]
    base += ["--strategy", "uniform", "--n", "2", "--run.eval_every", "1", "--run.progress", "false"]
    base += ["--model.threads", "1", "--run.report_to", report_to, "--run.save_every", "1"]
    first = subprocess.run([*base, "--steps", "2", "--run-dir", str(run)], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    again = subprocess.run([*base, "--steps", "3", "--resume", str(run)], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "warning: tracker" not in first.stderr + again.stderr
    jsonl = {r["step"]: r for r in read_metrics(run)}
    assert sorted(jsonl) == [0, 1, 2, 3]
    state = json.loads((run / STATE_FILE).read_text())

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = EventAccumulator(str(run / "tensorboard"))
    tb.Reload()
    want = {s: jsonl[s]["time_step_s"] for s in (1, 2, 3)}  # a number every step, different every step
    assert {e.step: e.value for e in tb.Scalars("time/time_step_s")} == pytest.approx(want)

    if "wandb" in INSTALLED:
        runs = wandb_history(tmp_path)
        assert list(runs) == [state["wandb"]["id"]]  # the resumed process continued the same W&B run
        rows = runs[state["wandb"]["id"]]
        assert {r["step"]: r["time/time_step_s"] for r in rows if "time/time_step_s" in r} == pytest.approx(want)
        assert {r["step"] for r in rows if "eval/eval_accuracy" in r} == {0, 1, 2, 3}
        assert any(r.get("samples/_type") == "table-file" for r in rows)
    if "mlflow" in INSTALLED:
        rid = state["mlflow"]["run_id"]
        assert mlflow_metric(run, rid, "time/time_step_s") == pytest.approx(want)
        assert set(mlflow_metric(run, rid, "eval/eval_pass_4")) == {0, 1, 2, 3}  # '@' refused by MLflow: '_'
        (exp_run,) = glob.glob(str(run / "mlruns" / "*" / rid))
        assert Path(exp_run, "params", "run.report_to").read_text() == report_to  # the config, once
        assert json.loads(Path(exp_run, "artifacts", "config.json").read_text())["task"]["train_size"] == 16
        assert Path(exp_run, "artifacts", "samples", "step_000003.json").exists()
    if "trackio" in INSTALLED:
        db = sqlite3.connect(tmp_path / "trackio" / "reinforce-ada.db")
        rows = db.execute("select run_id, step, metrics from metrics where run_name = ?", (str(run),)).fetchall()
        assert len({r[0] for r in rows}) == 1  # one trackio run, continued
        times = {step: json.loads(m)["time/time_step_s"] for _, step, m in rows if "time/time_step_s" in json.loads(m)}
        assert times == pytest.approx(want)
        assert any("samples" in json.loads(m) for _, _, m in rows)
        (config,) = db.execute("select config from configs where run_name = ?", (str(run),)).fetchall()
        assert json.loads(config[0])["run"]["report_to"] == report_to


# -- report tags ------------------------------------------------------------------------------------------------------
# report.png on a task without difficulty levels, and TensorBoard tags grouped by section (issue 25).
def test_tags_are_grouped():
    assert tb_tag("eval_accuracy_L3") == "eval/eval_accuracy_L3"
    assert tb_tag("samples_generated") == "train/samples_generated"
    assert tb_tag("worker0_busy_s") == "rollout/worker0_busy_s"


@pytest.mark.filterwarnings("ignore:task.eval_path is unset")
def test_file_task_report_shows_completion_lengths_instead_of_an_empty_level_panel(model_dir, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"q": f"{i}+1=", "a": str(i + 1)}) + "\n" for i in range(12)))
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"name": "file", "path": str(data), "prompt_key": "q", "answer_key": "a", "eval_size": 4},
            "generation": {"max_new_tokens": 3},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 2, "batch_size": 2, "eval_every": 1, "progress": False},
            "strategy": {"name": "uniform", "n": 2},
        },
        "test",
    )
    Trainer(cfg, tensorboard=False).fit()
    rows = read_metrics(tmp_path / "run")
    assert all("tokens_generated" in r for r in rows if "samples_generated" in r)
    out = make_report(tmp_path / "run")
    assert out.exists() and out.stat().st_size > 10_000
