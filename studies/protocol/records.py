"""A study's runs in one compact file, `results/records.jsonl.gz`: what every committed figure is regenerated from.

One JSON object a line, gzip'd with a fixed mtime (the same runs give the same bytes), of two kinds:
1) `{"kind": "run", "id": ...}`: one finished run, reduced to what the study's analysis and figures read. `id` names
   the record it was made from (for a `compare` run: the record file's name in the records folder, a hash of the code
   and the job, `bench.jobs`), so its provenance can be checked against the commit that made it; git history keeps
   the full records. `compact` reduces a `bench.run` record: curves at every evaluation kept whole, the per-step
   series a figure draws kept (`KEEP`) and the ones the GPU cost model prices a step by (`bench.costmodel.GPU_SERIES`:
   rows per round and samples trained, so a revised model reprices every run), the others reduced to the statistics
   the tables read over the first `steps` (`bench.analysis.head_stat`) and to the cumulative CPU seconds at each
   evaluation (`bench.compute`; a run without the GPU series keeps its GPU-model seconds as they were computed).
2) `{"kind": "result", "name": ...}`: one committed result: what no run gives (settings, machine, testbed and pool
   digests, a registration's provenance and content as they were when the result was written, the command and date)
   and the ids of the runs it reads, per phase.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RUN_FIELDS = ("key", "pool", "arm", "lr", "seed", "steps", "phase", "eval_step", "accuracy", "eval_tokens")
"""What every run keeps (a sweep run: nothing more; the lr choice and the equal-lr table read only these)."""
MAIN_FIELDS = ("per_level", "eval_samples", "sampled_check", "seconds", "load", "cpu", "prior")
"""What a main run keeps beside them, where it has them."""
KEEP = ("no_signal_share",)
"""Per-step series kept whole (the figure draws them)."""
HEAD = {
    "mean": ("no_signal_share", "samples_per_step", "tokens_per_step"),
    "nanmean": ("zero_adv_share",),
    "median": ("time_step_s", "time_generate_s", "time_train_s"),
}
"""Per-step series reduced to these statistics over the first `steps` steps (`bench.analysis.head_stat`)."""


def compact(record: dict[str, Any], steps: int, run_id: str) -> dict[str, Any]:
    """A `bench.run` record as a compact run (module docstring); `steps`: the horizon the tables read."""
    from reinforce_ada.bench.analysis import head_stat
    from reinforce_ada.bench.compute import axis_x
    from reinforce_ada.bench.costmodel import GPU_SERIES

    out: dict[str, Any] = {"kind": "run", "id": run_id, **{k: record[k] for k in RUN_FIELDS}}
    if record["phase"] != "main":
        return out
    out.update({k: record[k] for k in MAIN_FIELDS if k in record})
    out.update({k: record[k] for k in KEEP if k in record})
    priced = all(k in record for k in GPU_SERIES)
    if priced:  # whole: the GPU model reprices the run from them (`bench.compute.axis_x`)
        out.update({k: record[k] for k in GPU_SERIES})
    out["head"] = {"steps": steps}
    for stat, keys in HEAD.items():
        out["head"][stat] = {k: head_stat(record, k, steps, stat) for k in keys if k in record}
    for axis in ("cpu_s",) if priced else ("cpu_s", "gpu_s"):
        try:
            out[f"eval_{axis}"] = axis_x(record, axis, steps_only=True)  # the prior's cost is added when read
        except (KeyError, ValueError):  # a run without the series that axis needs: the axis is left out, as before
            pass
    return out


def write(path: Path, runs: Iterable[dict[str, Any]], results: Iterable[dict[str, Any]]) -> None:
    """Runs (keys sorted, deduplicated by id: two different runs under one id is an error) then results (keys in
    their order), each sorted by id or name, atomically."""
    by_id: dict[str, str] = {}
    for r in runs:
        line = json.dumps({**r, "kind": "run"}, sort_keys=True, separators=(",", ":"))
        if by_id.setdefault(r["id"], line) != line:
            raise ValueError(f"two different runs share the id {r['id']!r}")
    lines = [by_id[i] for i in sorted(by_id)]
    named = {}
    for res in results:
        # keys in their order, not sorted: a result's pools and arms are in run order, which its tables follow
        named[res["name"]] = json.dumps({"kind": "result", **res}, separators=(",", ":"))
    lines += [named[n] for n in sorted(named)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(("\n".join(lines) + "\n").encode())
    tmp.replace(path)


def read(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(runs by id, results by name)."""
    runs, results = {}, {}
    with gzip.open(path, "rt") as f:
        for line in f:
            obj = json.loads(line)
            kind = obj.pop("kind")
            if kind == "run":
                runs[obj["id"]] = obj
            elif kind == "result":
                results[obj["name"]] = obj
            else:
                raise ValueError(f"{path}: a line of unknown kind {kind!r}")
    return runs, results


def runs_of(result: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A result's runs per phase, in the order it lists them; a missing id is an error naming it."""
    missing = [i for ids in result["runs"].values() for i in ids if i not in runs]
    if missing:
        raise ValueError(f"result {result['name']!r} reads runs the records file lacks: {missing[:3]}")
    return {phase: [runs[i] for i in ids] for phase, ids in result["runs"].items()}


def update(path: Path, result: dict[str, Any], runs: Iterable[dict[str, Any]]) -> None:
    """Put one result (and its runs) into the records file, replacing a result of the same name; runs no result reads
    any more are dropped (git history keeps them)."""
    old_runs, old_results = read(path) if path.exists() else ({}, {})
    results = {**old_results, result["name"]: result}
    merged = {**old_runs, **{r["id"]: r for r in runs}}
    used = {i for res in results.values() for ids in res["runs"].values() for i in ids}
    write(path, [r for i, r in merged.items() if i in used], results.values())
