"""Where a resumed tracker writes (`training.tracker_state`): MLflow's store is recorded relative to the run folder,
so a copied or moved folder logs only into itself; a recorded location outside the folder is refused naming the key;
a store replaced by a link mid-run stops the run. Records written by 0.4.0 (an absolute `file://` URI) still resume."""

from __future__ import annotations

import glob
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.training import run_dir as run_folder
from reinforce_ada.training.tracking import STATE_FILE, Tracker
from tests.helpers import train_config

needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow is not installed")


@pytest.fixture(autouse=True)
def _no_mlflow_server(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def logged(run: Path, steps: range) -> None:
    t = Tracker(run, report_to="mlflow", config={"run": {"steps": 9}})
    for step in steps:
        t.log({"step": step, "loss": float(step)})
    t.close()


def losses(run: Path) -> dict[int, float]:
    """step -> train/loss of every MLflow run in the folder's own store."""
    out = {}
    for f in glob.glob(str(run / "mlruns" / "*" / "*" / "metrics" / "train" / "loss")):
        out |= {int(s): float(v) for _, v, s in (ln.split() for ln in Path(f).read_text().splitlines())}
    return out


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@needs_mlflow
def test_a_copied_run_folder_logs_to_mlflow_only_into_itself(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    logged(a, range(2))
    assert json.loads((a / STATE_FILE).read_text())["mlflow"]["store"] == "mlruns"  # relative, never an absolute URI
    before = files(a)
    shutil.copytree(a, b)  # what `--resume A --run-dir B`'s error advises: copy the folder there and resume it
    logged(b, range(2, 4))
    assert files(a) == before  # it logged into the original folder's MLflow run
    assert losses(b) == {0: 0.0, 1: 1.0, 2: 2.0, 3: 3.0}
    assert len(glob.glob(str(b / "mlruns" / "*" / "*" / "artifacts" / "config.json"))) == 1


@needs_mlflow
def test_a_moved_run_folder_does_not_recreate_its_old_mlflow_store(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    logged(a, range(2))
    a.rename(b)
    logged(b, range(2, 3))
    assert not a.exists()
    assert losses(b) == {0: 0.0, 1: 1.0, 2: 2.0}


@needs_mlflow
@pytest.mark.parametrize(
    "record, key",
    [
        ({"store": "../elsewhere"}, "mlflow.store"),
        ({"store": "/tmp/elsewhere"}, "mlflow.store"),
        ({"tracking_uri": "file:///{tmp}/elsewhere/store"}, "mlflow.tracking_uri"),
        ({"tracking_uri": "http://collector.example:5000"}, "mlflow.tracking_uri"),
    ],
    ids=["dotdot", "absolute", "file-uri", "server"],
)
def test_an_edited_mlflow_location_is_refused_naming_the_key(tmp_path, record, key):
    run = tmp_path / "run"
    logged(run, range(1))
    state = json.loads((run / STATE_FILE).read_text())
    mlflow = {"run_id": state["mlflow"]["run_id"]}
    mlflow |= {k: v.replace("{tmp}", str(tmp_path).lstrip("/")) for k, v in record.items()}
    (run / STATE_FILE).write_text(json.dumps({"mlflow": mlflow}))
    with pytest.raises(ConfigError, match=rf"trackers.json's {key} is .*remove the \"mlflow\" entry"):
        logged(run, range(1, 2))
    assert not (tmp_path / "elsewhere").exists()  # it used to create a store wherever the URI said


def test_the_record_is_checked_before_the_model_loads(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / STATE_FILE).write_text(json.dumps({"mlflow": {"run_id": "0" * 32, "store": "../../x"}}))
    cfg = train_config(tmp_path / "no-model", run, run={"report_to": "tensorboard,mlflow"})
    with pytest.raises(ConfigError, match=r"trackers.json's mlflow.store is '../../x'"):
        run_folder.open_run_dir(cfg)
    from reinforce_ada.training import tracker_state

    tracker_state.check(run, "tensorboard")  # not reported to: not checked, not refused


@needs_mlflow
def test_a_record_from_0_4_0_resumes_into_the_folders_own_store(tmp_path):
    a = tmp_path / "a"
    logged(a, range(1))
    state = json.loads((a / STATE_FILE).read_text())
    old = {"run_id": state["mlflow"]["run_id"], "tracking_uri": (a.resolve() / "mlruns").as_uri()}
    (a / STATE_FILE).write_text(json.dumps({"mlflow": old}))  # as 0.4.0 wrote it: absolute
    b = tmp_path / "b"
    shutil.copytree(a, b)
    before = files(a)
    logged(b, range(1, 2))  # the copy's URI names a/mlruns: its own mlruns/ holds the run, so it logs there
    assert files(a) == before and losses(b) == {0: 0.0, 1: 1.0}
    recorded = json.loads((b / STATE_FILE).read_text())["mlflow"]
    assert recorded == {"run_id": old["run_id"], "store": "mlruns", "folder": str(b)}


@needs_mlflow
def test_mlflows_store_replaced_by_a_link_mid_run_stops_the_run(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    t = Tracker(run, report_to="mlflow", config={})
    t.log({"step": 0, "loss": 0.0})
    shutil.copytree(run / "mlruns", outside, dirs_exist_ok=True)
    before = files(outside)
    shutil.rmtree(run / "mlruns")
    (run / "mlruns").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"run/mlruns was replaced while the run went on"):
        t.log({"step": 1, "loss": 1.0})
    t.close()
    assert files(outside) == before


class Made:
    """A tracker in a store outside the run folder (as W&B's, trackio's): it records what it was asked to continue."""

    resumed: list = []

    def __init__(self, run_dir, config, resume):
        Made.resumed.append(resume)
        self.state = {"id": resume["id"] if resume else f"run-{len(Made.resumed)}"}

    def log(self, step, scalars): ...
    def table(self, step, rows): ...
    def close(self): ...


def test_a_copy_of_a_folder_starts_its_own_run_in_an_outside_store_and_a_moved_one_continues(tmp_path, monkeypatch):
    from reinforce_ada.training import trackers

    monkeypatch.setitem(trackers.SINKS, "made", Made)
    Made.resumed = []

    def log(run: Path, step: int) -> None:
        t = Tracker(run, report_to="made")
        t.log({"step": step, "loss": 1.0})
        t.close()

    a = tmp_path / "a"
    log(a, 0)
    shutil.copytree(a, tmp_path / "copy")
    log(tmp_path / "copy", 1)  # a still holds run-1: the copy's steps would land in the original's run
    a.rename(tmp_path / "moved")
    log(tmp_path / "moved", 1)  # the folder that made run-1, moved: it continues it
    assert Made.resumed == [None, None, {"id": "run-1"}]
    state = json.loads((tmp_path / "copy" / STATE_FILE).read_text())["made"]
    assert state == {"id": "run-2", "folder": str(tmp_path / "copy")}
