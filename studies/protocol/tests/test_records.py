"""A study's compact records (protocol.records): a run reduced to what the analysis reads, the file's round trip."""

from __future__ import annotations

import pytest

from reinforce_ada.bench import analysis
from studies.protocol import records
from tests.test_compute import record


def _full(seed: int, arm: str = "grpo-n4") -> dict:
    r = record(arm, seed, steps=20)
    n = len(r["time_step_s"])
    r.update(pool="p", phase="main", per_level={"L1": r["accuracy"]}, seconds={"total": 1.0}, cpu="x", load={})
    r.update(no_signal_share=[0.5] * n, zero_adv_share=[0.25] * n, samples_per_step=[64.0] * n)
    r.update(tokens_per_step=[100.0] * n, time_generate_s=[0.05] * n, time_train_s=[0.05] * n)
    return r


def test_a_compact_run_keeps_what_the_table_reads():
    full = _full(0)
    c = records.compact(full, 10, "abc")
    assert c["id"] == "abc" and c["kind"] == "run" and "time_step_s" not in c
    assert c["no_signal_share"] == full["no_signal_share"]  # kept whole: the figure draws it
    for key, stat in (("time_step_s", "median"), ("zero_adv_share", "nanmean"), ("samples_per_step", "mean")):
        assert analysis.head_stat(c, key, 10, stat) == analysis.head_stat(full, key, 10, stat)
    assert c["eval_cpu_s"][:2] == pytest.approx([0.0, 1.0])
    assert "eval_gpu_s" not in c and "rows_per_round" not in c  # a record without the GPU series: no GPU axis
    assert records.compact({**full, "phase": "sweep"}, 10, "s").keys() == {"kind", "id", *records.RUN_FIELDS}


def test_a_compact_run_keeps_what_the_gpu_model_prices_so_a_revised_model_reprices_it():
    from reinforce_ada.bench.compute import axis_x
    from reinforce_ada.bench.costmodel import GPU_SERIES, GpuCost, cumulative, gpu_record_seconds

    full = _full(0)
    n = len(full["time_step_s"])
    full.update(rows_per_round=[[8, 4]] * n, samples_trained=[4.0] * n)
    c = records.compact(full, 10, "abc")
    assert all(c[k] == full[k] for k in GPU_SERIES) and "eval_gpu_s" not in c  # kept whole, not the model's sums
    assert axis_x(c, "gpu_s") == axis_x(full, "gpu_s") == cumulative(full, "gpu")
    other = GpuCost(step_s=0.0)  # another model prices the compact run as it prices the full record
    model = lambda r: gpu_record_seconds(r, other)  # noqa: E731
    assert cumulative(c, model) == cumulative(full, model) != cumulative(c, "gpu")
    old = {k: v for k, v in c.items() if k not in GPU_SERIES} | {"eval_gpu_s": [0.0, 1.5, 3.0]}
    assert axis_x(old, "gpu_s") == [0.0, 1.5, 3.0]  # a run compacted before: its seconds as they were stored


def test_the_file_round_trips_dedupes_and_updates(tmp_path):
    f = tmp_path / "records.jsonl.gz"
    runs = [records.compact(_full(s), 10, f"r{s}") for s in range(2)]
    res = {"name": "one", "meta": {"pools": {"b": 1, "a": 2}}, "runs": {"main": ["r0", "r1"]}}
    records.write(f, [*runs, runs[0]], [res])  # the same run twice is one run
    got_runs, got = records.read(f)
    assert sorted(got_runs) == ["r0", "r1"] and list(got["one"]["meta"]["pools"]) == ["b", "a"]  # order kept
    assert [r["seed"] for r in records.runs_of(got["one"], got_runs)["main"]] == [0, 1]
    before = f.read_bytes()
    records.write(f, runs, [res])
    assert f.read_bytes() == before  # the same runs give the same bytes
    with pytest.raises(ValueError, match="share the id"):
        records.write(f, [runs[0], {**runs[1], "id": "r0"}], [res])
    records.update(f, {"name": "one", "runs": {"main": ["r1"]}}, [])  # r0 no longer read: dropped
    assert sorted(records.read(f)[0]) == ["r1"]
    with pytest.raises(ValueError, match="lacks"):
        records.runs_of({"name": "x", "runs": {"main": ["nope"]}}, {})
