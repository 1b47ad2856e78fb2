"""Metrics sinks: `metrics.jsonl` (the contract), the trackers of `run.report_to` (`training.trackers`: TensorBoard,
W&B, MLflow, trackio), and a progress bar.

`metrics.jsonl` is appended and rewritten through the run folder's gate (`training.gate.Folder`: no link followed,
checked at each open) and keeps everything: a tracker that fails is switched off with one warning and the run goes
on, but a folder replaced while the run goes (the run folder, `tensorboard/`, MLflow's store) stops it naming the
folder (`gate.FolderChanged`), checked at every log. Trackers other than TensorBoard start at the first `log`, once
the trainer knows whether it resumed: the ids in the run folder's `trackers.json` continue the same tracker run
(`training.tracker_state` decides where), else a new one is made and given the config.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.training import tracker_state
from reinforce_ada.training.gate import FolderChanged
from reinforce_ada.training.samples_log import FILE as SAMPLES_FILE
from reinforce_ada.training.tracker_state import STATE_FILE as STATE_FILE
from reinforce_ada.training.trackers import SINKS, as_folder, parse_report_to


class Tracker:
    def __init__(
        self,
        run_dir: Any,
        *,
        tensorboard: bool = True,
        report_to: str = "tensorboard",
        config: dict[str, Any] | None = None,
    ):
        self.folder = as_folder(run_dir)  # the run's gate.Folder (a path is opened, the folder made)
        self.run_dir = self.folder.path
        self.path = self.run_dir / "metrics.jsonl"
        names = [n for n in parse_report_to(report_to) if tensorboard or n != "tensorboard"]
        self.config = config or {}
        self.sinks: dict[str, Any] = {}
        self._waiting = [n for n in names if n != "tensorboard"]  # started at the first log
        if "tensorboard" in names:
            self.sinks["tensorboard"] = SINKS["tensorboard"](self.folder, self.config, None)
        self._samples_at = 0
        self._pending: list[dict[str, Any]] = []

    @property
    def writer(self) -> Any:
        """The TensorBoard writer (None without TensorBoard)."""
        tb = self.sinks.get("tensorboard")
        return tb.writer if tb is not None else None

    def truncate_after(self, step: int) -> None:
        """Keep one line per step up to `step` (resuming from a checkpoint repeats the later ones); a half-written
        line (a kill mid-write) and repeated steps (a kill before the first checkpoint) are dropped. Atomic."""
        if not self.path.exists():
            return
        keep: dict[int, str] = {}
        for ln in self.path.read_text(errors="replace").splitlines():
            row = _parse(ln)
            if row is not None and isinstance(row.get("step"), int) and row["step"] <= step:
                keep[row["step"]] = ln  # the last line of a step wins: it is the one the checkpoint followed
        self.folder.write(self.path.name, "".join(keep[k] + "\n" for k in sorted(keep)))

    def log(self, metrics: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        self.folder.check()  # the run folder itself replaced mid-run: stop, naming it
        self.folder.append(self.path.name, json.dumps(clean) + "\n")
        if self._waiting:
            self._start()
        if not self.sinks:
            return
        step = metrics["step"]
        scalars = {
            tb_tag(k): float(v)
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and k != "step"
        }
        rows = self._new_samples(step) if set(self.sinks) - {"tensorboard"} else []
        for name in list(self.sinks):
            self._call(name, "log", step, scalars)
            if rows and name in self.sinks:
                self._call(name, "table", step, rows)

    def close(self) -> None:
        sinks, self.sinks = dict(self.sinks), {}
        for name, sink in sinks.items():  # every sink closed, even when one finds its folder replaced
            try:
                sink.close()
            except Exception as e:  # deliberate: closing is the end; what failed is said, nothing more is written
                _warn(name, "failed (close)", e)

    def _start(self) -> None:
        """Start the waiting trackers: each continues its run named in `trackers.json`, else makes one. A record
        naming a store outside the folder is refused (`tracker_state`), not a tracker failure."""
        state = tracker_state.read(self.run_dir)
        for name in self._waiting:
            resume = tracker_state.resumable(self.run_dir, name, state.get(name))
            if name == "mlflow" and resume is not None:
                tracker_state.check(self.run_dir, name)
            try:
                sink = SINKS[name](self.folder, self.config, resume)
            except FolderChanged:
                raise
            except Exception as e:  # deliberate: any tracker failure leaves the run and the JSONL alone
                _warn(name, "could not start", e)
                continue
            self.sinks[name] = sink
            state[name] = {**sink.state, "folder": str(self.run_dir.absolute())}  # a copy of the folder is told apart
        self._waiting = []
        self.folder.write(STATE_FILE, json.dumps(state, indent=1) + "\n")

    def _call(self, name: str, method: str, *args: Any) -> None:
        try:
            getattr(self.sinks[name], method)(*args)
        except FolderChanged:
            raise  # not a tracker failure: a folder the run writes to was replaced; the run stops, naming it
        except Exception as e:  # deliberate: as in _start; the tracker is off from here on
            sink = self.sinks.pop(name)
            _warn(name, f"failed ({method})", e)
            if method != "close":
                try:
                    sink.close()
                except Exception:  # deliberate: it already failed; closing is a courtesy
                    pass

    def _new_samples(self, step: int) -> list[dict[str, Any]]:
        """`samples.jsonl`'s rows of `step`: the file is read on from where the last call left it (from the start
        when a resumed run rewrote it shorter); rows of later steps wait for their step."""
        try:  # read through the gate too: a link in its place is refused, never followed to another file's rows
            fd = self.folder.open_file(SAMPLES_FILE, os.O_RDONLY)
        except FileNotFoundError:
            fd = None
        if fd is not None:
            with os.fdopen(fd, "rb") as fh:
                if fh.seek(0, 2) < self._samples_at:
                    self._samples_at = 0
                fh.seek(self._samples_at)
                data = fh.read()
            end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
            self._samples_at += end
            rows = [_parse(ln) for ln in data[:end].decode(errors="replace").splitlines()]
            self._pending += [r for r in rows if r is not None and isinstance(r.get("step"), int)]
        now = [r for r in self._pending if r["step"] == step]
        self._pending = [r for r in self._pending if r["step"] > step]
        return now


def _warn(name: str, what: str, e: BaseException) -> None:
    print(
        f"warning: tracker {name} {what} ({type(e).__name__}: {e}); it is off for the rest of this run, which goes "
        "on: metrics.jsonl keeps every metric",
        file=sys.stderr,
        flush=True,
    )


TB_GROUPS = (
    ("eval_", "eval"),
    ("time_", "time"),
    ("worker", "rollout"),
    ("rollout_", "rollout"),
    ("warm_start", "eval"),
)
"""TensorBoard sections by metric-name prefix; every other metric is under `train/`."""


def tb_tag(key: str) -> str:
    """The TensorBoard tag of a metric: `section/name`, so the dashboard groups train, eval, time and rollout.

    >>> tb_tag("eval_accuracy"), tb_tag("loss"), tb_tag("time_step_s")
    ('eval/eval_accuracy', 'train/loss', 'time/time_step_s')
    """
    group = next((g for prefix, g in TB_GROUPS if key.startswith(prefix)), "train")
    return f"{group}/{key}"


def _parse(line: str) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metric lines; a half-written line (a run killed mid-write) is skipped."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [row for ln in path.read_text(errors="replace").splitlines() if (row := _parse(ln)) is not None]


def postfix(m: dict[str, Any]) -> dict[str, str]:
    keys = {
        "reward_first_round": "reward",
        "zero_adv_prompt_share": "zero_adv",
        "samples_generated": "samples",
        "eval_accuracy": "eval_acc",
        "time_step_s": "s/step",
    }
    return {short: f"{m[k]:.3g}" for k, short in keys.items() if isinstance(m.get(k), int | float)}


def progress_bar(enabled: bool, **kw: Any) -> Any:
    """A tqdm bar, or a bar that shows nothing. Off a terminal (a log file, CI) a bar opened while another is open
    (the trainer's inside `compare`'s, or one given a `position`) is not drawn: tqdm keeps nested bars apart with
    cursor-movement escapes, which a log shows as garbage. A single bar off a terminal still prints its updates."""
    if enabled:
        from tqdm.auto import tqdm

        stream = kw.get("file") or sys.stderr
        nested = kw.get("position") is not None or len(getattr(tqdm, "_instances", ())) > 0
        if nested and not (hasattr(stream, "isatty") and stream.isatty()):
            return _NullBar()
        return tqdm(**kw, dynamic_ncols=True)
    return _NullBar()


class _NullBar:
    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: Any) -> None: ...

    def update(self, n: int) -> None: ...
    def set_postfix(self, *args: Any, **kw: Any) -> None: ...
    def close(self) -> None: ...
