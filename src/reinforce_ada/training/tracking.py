"""Metrics sinks: `metrics.jsonl` (the contract), TensorBoard events, and a progress bar.

`metrics.jsonl` is appended and rewritten without following links (`run_dir.append_line`, `run_dir.write_file`)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.training.run_dir import append_line, write_file


class Tracker:
    def __init__(self, run_dir: Path, *, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(run_dir) / "tensorboard"))

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
        write_file(self.path, "".join(keep[k] + "\n" for k in sorted(keep)))

    def log(self, metrics: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        append_line(self.path, json.dumps(clean) + "\n")
        if self.writer is not None:
            for k, v in metrics.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and k != "step":
                    self.writer.add_scalar(tb_tag(k), v, metrics["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


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
