"""One-off, kept for provenance: the compact records gain the GPU cost model's per-step series.

Until the GPU model was revised (`bench.costmodel`, priced round by round and fitted to the paper's step times), the
records file kept each main run's cumulative GPU-model seconds as that model computed them, not the series they came
from, so no later model could price the runs again. The full records are in git history (`SOURCES`: the commit
before `studies/` was made). For every main run this reads its record by id, checks that it is that run (its
evaluation steps, accuracies and tokens equal the compact run's, and the old model (`old_gpu_seconds`) on its series
gives the stored seconds), and puts the record's `rows_per_round` and `samples_trained` in place of `eval_gpu_s`.

    python -m studies.compute_to_target.backfill_gpu    # then: python -m studies.compute_to_target.regenerate
"""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from typing import Any

import numpy as np

from reinforce_ada.bench.costmodel import GPU_SERIES
from studies.compute_to_target.study import RECORDS, ROOT
from studies.protocol import records

SOURCES = ("79dedc9^:benchmarks/results/compute_records/", "79dedc9^:benchmarks/results/scouting/batch8_records/")
"""Where git history keeps the full records (the compute-to-target runs, then the batch-8 scouting runs)."""


def old_gpu_seconds(r: dict[str, Any]) -> list[float]:
    """The retired model's cumulative seconds at each evaluation: every round at the step's longest completion,
    sum_r (0.02 + 0.005 L ceil(rows_r / 64)) + 2.5e-5 x tokens trained."""
    per_step = [
        sum(0.02 + 0.005 * length * math.ceil(x / 64) for x in rows) + 2.5e-5 * trained
        for rows, length, trained in zip(
            r["rows_per_round"], r["max_completion_tokens"], r["tokens_trained"], strict=True
        )
    ]
    total = np.concatenate([[0.0], np.cumsum(per_step)])
    return [float(total[s]) for s in r["eval_step"]]


def _blobs(specs: list[str]) -> dict[str, bytes | None]:
    """Each `commit:path` blob (None where it is missing), through one `git cat-file --batch`."""
    p = subprocess.run(
        ["git", "cat-file", "--batch"],
        input="".join(s + "\n" for s in specs).encode(),
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    out, buf = {}, p.stdout
    for spec in specs:
        head, _, buf = buf.partition(b"\n")
        if head.endswith(b" missing"):
            out[spec] = None
            continue
        size = int(head.split()[2])
        out[spec], buf = buf[:size], buf[size + 1 :]
    return out


def backfill() -> int:
    """Every main run of the records file gains the series (module docstring); returns how many did."""
    runs, results = records.read(RECORDS)
    todo = [i for i, r in runs.items() if r["phase"] == "main" and not all(k in r for k in GPU_SERIES)]
    specs = [f"{src}{i}.json.gz" for i in todo for src in SOURCES]
    blobs = _blobs(specs)
    for i in todo:
        raw = next((blobs[f"{src}{i}.json.gz"] for src in SOURCES if blobs[f"{src}{i}.json.gz"]), None)
        if raw is None:
            raise SystemExit(f"run {i}: no full record under {SOURCES}")
        full, run = json.loads(gzip.decompress(raw)), runs[i]
        for k in ("eval_step", "accuracy", "eval_tokens"):
            if full[k] != run[k]:
                raise SystemExit(f"run {i}: the record's {k} differs from the compact run's")
        if not np.allclose(old_gpu_seconds(full), run["eval_gpu_s"], rtol=1e-12, atol=1e-12):
            raise SystemExit(f"run {i}: the old model on the record does not give the stored eval_gpu_s")
        run.update({k: full[k] for k in GPU_SERIES})
        run.pop("eval_gpu_s")
    records.write(RECORDS, runs.values(), results.values())
    return len(todo)


if __name__ == "__main__":
    print(f"{backfill()} main runs gained {GPU_SERIES}; now run python -m studies.compute_to_target.regenerate")
    sys.exit(0)
