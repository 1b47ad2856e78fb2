"""Metrics sinks: `metrics.jsonl` (the contract), TensorBoard events, and a progress bar."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class Tracker:
    def __init__(self, run_dir: Path, *, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(run_dir) / "tensorboard"))

    def truncate_after(self, step: int) -> None:
        """Drop lines of steps after `step` (resuming from a checkpoint repeats them)."""
        if not self.path.exists():
            return
        keep = [ln for ln in self.path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= step]
        self.path.write_text("".join(k + "\n" for k in keep))

    def log(self, metrics: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        with self.path.open("a") as fh:
            fh.write(json.dumps(clean) + "\n")
        if self.writer is not None:
            for k, v in metrics.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and k != "step":
                    self.writer.add_scalar(k, v, metrics["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
