"""Time and memory of the README's main command (`reinforce-ada train`), from a cold cache.

Runs the CLI in a subprocess with an empty warm-start cache (so the supervised warm start is included), records
wall time, peak RSS of the child, and start vs end held-out accuracy, and writes
`benchmarks/results/default_run.json` plus a copy of the run's `report.png`.

    python -m benchmarks.default_run            # the full default (about 2 minutes on 2 cores)
    python -m benchmarks.default_run --steps 20  # a smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None, help="override run.steps (default: the embedded default)")
    ap.add_argument("--out", default=str(RESULTS / "default_run.json"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ra-default-"))
    env = {**os.environ, "REINFORCE_ADA_CACHE": str(work / "cache")}
    cmd = [
        sys.executable,
        "-m",
        "reinforce_ada.cli",
        "train",
        "--run-dir",
        str(work / "run"),
        "--run.progress",
        "false",
    ]
    if args.steps:
        cmd += ["--steps", str(args.steps)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rows = [json.loads(x) for x in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval_accuracy" in r]
    train = [r for r in rows if "loss" in r]
    warm = json.loads(next((work / "cache").glob("*/warm_start.json")).read_text())
    levels = sorted((k for k in evals[0] if k.startswith("eval_accuracy_L")), key=lambda k: int(k[15:]))
    result = {
        "command": "reinforce-ada train"
        + (f" --steps {args.steps}" if args.steps else "")
        + "  (cold warm-start cache)",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "wall_s": round(wall, 1),
        "warm_start_train_s": warm.get("train_seconds"),
        "rl_steps": len(train),
        "rl_time_s": round(sum(r["time_step_s"] for r in train), 1),
        "peak_rss_gib": round(peak_kib / 2**20, 2),
        "eval_accuracy_start": evals[0]["eval_accuracy"],
        "eval_accuracy_end": evals[-1]["eval_accuracy"],
        "eval_accuracy_per_level_start": {k[14:]: evals[0][k] for k in levels},
        "eval_accuracy_per_level_end": {k[14:]: evals[-1][k] for k in levels},
        "samples_generated_per_step": sum(r["samples_generated"] for r in train) / max(1, len(train)),
        "zero_adv_prompt_share_mean": sum(r["zero_adv_prompt_share"] for r in train) / max(1, len(train)),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    shutil.copy(work / "run" / "report.png", out.with_suffix(".png"))
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
