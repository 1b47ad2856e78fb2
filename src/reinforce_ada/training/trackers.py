"""Experiment trackers beside `metrics.jsonl`: TensorBoard, Weights & Biases, MLflow and trackio (`run.report_to`).

1) `run.report_to` names any subset, comma-separated (`tensorboard,wandb`; `none` for the JSONL alone), as TRL's
   `report_to` does. `parse_report_to` checks the names and that each tracker's package is installed (a missing one
   is a ConfigError naming the `pip install`), before the model is loaded.
2) One sink per tracker in `SINKS`, all built as `Sink(run_dir, config, resume)` (`run_dir`: the run's
   `gate.Folder`, a path-like) and driven by `log(step, scalars)`, `table(step, rows)` and `close()`; `state` is what
   continues the same tracker run after `--resume` (the run folder's `trackers.json`). Every sink gets the same
   names: TensorBoard's tags, `section/metric` (`tracking.tb_tag`: train, eval, time, rollout), finite numbers only.
   MLflow refuses some characters in a name (`eval/eval_pass@4`): it gets them as `_` (`mlflow_key`).
3) The config is logged once, when the tracker run is made (W&B config, MLflow params with the whole tree as
   `config.json`, trackio config); a resumed run does not log it again (MLflow refuses a changed param: `run.steps`
   may change), but to trackio, whose resume without a config blanks the one it had.
   Samples (`samples.jsonl`'s rows of the step) go as a table where the tracker has one: `wandb.Table`,
   `trackio.Table`, MLflow one JSON table per step (`samples/step_N.json`; `log_table` in a store outside the run
   folder, with pandas).
4) Where each writes, offline, with no server: W&B where `WANDB_DIR` says (default: the working directory's
   `wandb/`, not the run folder, whose promise is no symlinks: W&B links `latest-run`), online or offline as
   `WANDB_MODE` says (`offline`: `wandb sync` later); MLflow to `MLFLOW_TRACKING_URI`, else a file store in the run
   folder (`<run>/mlruns`, which MLflow 3 accepts with `MLFLOW_ALLOW_FILE_STORE=true`, set for it); trackio to its
   local store (`TRACKIO_DIR`, default `~/.cache/huggingface/trackio`). Project / experiment: `WANDB_PROJECT`,
   `MLFLOW_EXPERIMENT_NAME`, `TRACKIO_PROJECT`, else `reinforce-ada`; the run is named after the run folder.
5) A tracker that fails (at start or mid-run: network, disk, an API change) is switched off with one warning; the run
   goes on and `metrics.jsonl` keeps everything (`tracking.Tracker`). A folder it writes to that was replaced while
   the run went on is no such failure: it stops the run naming the folder (`gate.FolderChanged`).
6) Writes under the run folder pass the gate (`training.gate`): TensorBoard's events go through our own writer and
   one descriptor (`training.tb_events`); MLflow's own store is a folder the run made, checked (the same folder, no
   link or device in it) before and after each MLflow call, its artifacts (the config, the samples tables) written by
   us through the gate; its location is recorded relative to the run folder (`training.tracker_state`). W&B's and
   trackio's stores are outside the run folder: each must stay the folder it was at start (`Watched`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.extras import install_hint
from reinforce_ada.training.gate import Folder, FolderChanged
from reinforce_ada.training.tracker_state import mlflow_location

PROJECT = "reinforce-ada"
COLUMNS = ("step", "prompt_id", "prompt", "completion", "answer", "reward", "clipped")
"""The samples table's columns (`samples.jsonl` fields)."""
PARAM_CHARS = 6000
"""MLflow's longest param value: longer config values are cut (the whole tree is in `config.json`)."""


def _project(env: str) -> str:
    return os.environ.get(env) or PROJECT


def _rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r.get(c) for c in COLUMNS] for r in rows]


def as_folder(run: Any) -> Folder:
    """The run folder as a `gate.Folder` (a sink is given one by `Tracker`; a path from older callers is opened)."""
    return run if isinstance(run, Folder) else Folder(run)


class Watched:
    """A tracker's own store outside the run folder (W&B's, trackio's), found by its path each time: it must stay the
    folder it was at start (its path's links resolved as then), else the run stops naming it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.real, self.id = self._now()

    def _now(self) -> tuple[str, tuple[int, int] | None]:
        try:
            st = os.stat(self.path)
        except OSError:
            return os.path.realpath(self.path), None
        return os.path.realpath(self.path), (st.st_dev, st.st_ino)

    def check(self) -> None:
        if self.id is not None and self._now() != (self.real, self.id):
            raise FolderChanged(
                f"{self.path} (the tracker's store, {self.real} at start) was replaced while the run went on; the run "
                "stops rather than let the tracker write elsewhere. Put it back, then resume"
            )


class TensorBoardSink:
    """TensorBoard events under `<run>/tensorboard`, written by our own writer (`training.tb_events`; no table)."""

    extra = None  # a dependency: nothing to install

    def __init__(self, run_dir: Any, config: dict[str, Any], resume: dict[str, Any] | None) -> None:
        from reinforce_ada.training.tb_events import EventsFile

        self.writer = EventsFile(as_folder(run_dir).sub("tensorboard"))
        self.state: dict[str, Any] = {}

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.writer.scalars(step, scalars)

    def table(self, step: int, rows: list[dict[str, Any]]) -> None: ...

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run (its id in `state`); `step` is a logged metric every other one is plotted against, so a resumed
    run may log a step again (W&B's own step only grows)."""

    extra = "wandb"

    def __init__(self, run_dir: Path, config: dict[str, Any], resume: dict[str, Any] | None) -> None:
        import wandb

        kw: dict[str, Any] = {"id": resume["id"], "resume": "allow"} if resume else {"config": config}
        self.run = wandb.init(project=_project("WANDB_PROJECT"), name=os.fspath(run_dir), reinit="create_new", **kw)
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        self.state = {"id": self.run.id}
        self.wandb = wandb
        self.store = Watched(Path(self.run.dir).parents[1])  # <WANDB_DIR>/wandb/<run>/files: W&B's folder

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.store.check()
        self.run.log({"step": step, **scalars})

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        self.store.check()
        self.run.log({"step": step, "samples": self.wandb.Table(columns=list(COLUMNS), data=_rows(rows))})

    def close(self) -> None:
        self.run.finish()


_MLFLOW_BAD = re.compile(r"[^A-Za-z0-9_\-. :/]")


def mlflow_key(tag: str) -> str:
    """A metric name MLflow accepts: characters it refuses become `_`.

    >>> mlflow_key("eval/eval_pass@4"), mlflow_key("train/loss")
    ('eval/eval_pass_4', 'train/loss')
    """
    return _MLFLOW_BAD.sub("_", tag)


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[mlflow_key(f"{prefix}{k}")] = str(v)[:PARAM_CHARS]
    return out


class MlflowSink:
    """An MLflow run through `MlflowClient` (no global active run); its id and store in `state` (the store relative
    to the run folder when it is the run's own: `training.tracker_state`)."""

    extra = "mlflow"

    def __init__(self, run_dir: Any, config: dict[str, Any], resume: dict[str, Any] | None) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        run = as_folder(run_dir)
        kind, where = mlflow_location(run.path, resume, os.environ.get("MLFLOW_TRACKING_URI"))
        self.store: Folder | None = run.sub(where) if kind == "store" else None
        uri = (run.path.absolute() / where).as_uri() if self.store is not None else where
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this
        self.guard()
        self.client = MlflowClient(tracking_uri=uri)
        if self.store is not None and "0" not in self.store.names():  # MLflow's own layout has its experiment 0
            with contextlib.suppress(AttributeError):  # an MLflow without it: the store works without experiment 0
                self.client._tracking_client.store._create_default_experiment()
        if resume:
            self.run_id = resume["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            name = _project("MLFLOW_EXPERIMENT_NAME")
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(name)
            self.run_id = self.client.create_run(exp_id, run_name=str(run.path)).info.run_id
            params = [Param(k, v) for k, v in _flat(config).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
                self.client.log_batch(self.run_id, params=params[i : i + 100])
            self.artifact("config.json", config)
        self.guard()
        self.state = {"run_id": self.run_id, **({"store": where} if self.store is not None else {"tracking_uri": uri})}
        self.pandas = importlib.util.find_spec("pandas") is not None

    def guard(self) -> None:
        """Before and after each MLflow call that writes: the run's own store is still the folder the run made and
        holds no link, FIFO or device MLflow could follow (`gate.Folder.check`, `refuse_links`)."""
        if self.store is not None:
            self.store.check()
            self.store.refuse_links()

    def artifact(self, path: str, data: dict[str, Any]) -> None:
        """A JSON artifact of the run: into its own store through the gate (MLflow's meta.yaml names the artifact
        folder by an absolute path, which in a copied folder is the original's), else through MLflow."""
        if self.store is None:
            self.client.log_dict(self.run_id, data, path)
            return
        exp_id = self.client.get_run(self.run_id).info.experiment_id
        self.store.write(Path(str(exp_id), self.run_id, "artifacts", path), json.dumps(data, indent=2))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_key(k), v, now, step) for k, v in scalars.items()]
        self.guard()
        for i in range(0, len(metrics), 1000):  # MLflow takes at most 1000 metrics a batch
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 1000])
        self.guard()

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        data = {c: [r.get(c) for r in rows] for c in COLUMNS}
        path = f"samples/step_{step:06d}.json"
        if self.store is not None:
            self.artifact(path, {"columns": list(COLUMNS), "data": _rows(rows)})
        elif self.pandas:
            self.client.log_table(self.run_id, data=data, artifact_file=path)
        else:
            self.client.log_dict(self.run_id, {"columns": list(COLUMNS), "data": _rows(rows)}, path)

    def close(self) -> None:
        self.guard()
        self.client.set_terminated(self.run_id)
        self.guard()


class TrackioSink:
    """A trackio run in its local store, resumed by name (the run folder)."""

    extra = "trackio"

    def __init__(self, run_dir: Path, config: dict[str, Any], resume: dict[str, Any] | None) -> None:
        import trackio

        project = (resume or {}).get("project") or _project("TRACKIO_PROJECT")
        name = (resume or {}).get("name") or os.fspath(run_dir)
        # trackio keeps one config per run and a resume without one blanks it: it is given the config every time
        kw: dict[str, Any] = {"config": config, "resume": "allow" if resume else "never"}
        with contextlib.redirect_stdout(io.StringIO()):  # its banner, on our stdout; one line of ours instead
            self.run = trackio.init(project=project, name=name, auto_log_cpu=False, auto_log_gpu=False, **kw)
        print(f"trackio: project {project!r}, run {name!r} (trackio show --project {project!r})", file=sys.stderr)
        self.state = {"project": project, "name": name}
        self.trackio = trackio
        from trackio.utils import TRACKIO_DIR

        self.store = Watched(TRACKIO_DIR)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.store.check()
        self.run.log(scalars, step=step)

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        self.store.check()
        self.run.log({"samples": self.trackio.Table(columns=list(COLUMNS), data=_rows(rows))}, step=step)

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.run.finish()


SINKS: dict[str, type] = {
    "tensorboard": TensorBoardSink,
    "wandb": WandbSink,
    "mlflow": MlflowSink,
    "trackio": TrackioSink,
}
"""`run.report_to` names -> sink classes, all `Sink(run_dir, config, resume)`: the only list of tracker names. A
sink's `extra` names the module it imports and the extra that installs it (None: a dependency, as TensorBoard)."""
REPORT_TO_HELP = (
    f"Trackers beside metrics.jsonl (always written), comma-separated: any of {', '.join(SINKS)}, or none "
    "(docs/trackers.md)."
)
"""`run.report_to`'s help, from `SINKS`."""


def parse_report_to(value: str) -> tuple[str, ...]:
    """`"tensorboard,wandb"` -> `("tensorboard", "wandb")`; `none` or `""` -> `()`. An unknown name, or a tracker
    whose package is not installed, is a ConfigError naming `run.report_to` (and the `pip install`).

    >>> parse_report_to(" tensorboard ,tensorboard"), parse_report_to("none")
    (('tensorboard',), ())
    """
    if not isinstance(value, str):
        raise ConfigError(f"run.report_to={value!r} must be text: comma-separated names of {sorted(SINKS)}, or none")
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in SINKS]
    if unknown:
        raise ConfigError(
            f"run.report_to={value!r}: unknown tracker {unknown[0]!r}; give comma-separated names of "
            f"{sorted(SINKS)}, or none (metrics.jsonl is always written)"
        )
    for n in names:
        extra = getattr(SINKS[n], "extra", None)  # the module it imports, and the extra that installs it
        if extra is not None and importlib.util.find_spec(extra) is None:
            raise ConfigError(f"run.report_to={value!r}: {n} is not installed here: {install_hint(extra)}")
    return tuple(dict.fromkeys(names))
