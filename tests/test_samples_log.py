"""Issue 25: a run shows what the policy wrote (samples.jsonl, clipped share), warns once when it cannot learn, warms
up within a short run and evaluates at the configured temperature."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import Ledger, StepBatch
from reinforce_ada.training import gate, samples_log
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.samples_log import SampleLog, clipped_share, sample_rows, zero_reward_warning
from reinforce_ada.types import Group, Prompt, Sample
from tests.helpers import train_config


def _batch(rewards: list[list[float]], reasons: list[list[str]]) -> StepBatch:
    groups = []
    for i, (rs, fr) in enumerate(zip(rewards, reasons, strict=True)):
        p = Prompt(id=f"p{i}", text=f"What is {i}+{i}?", answer=str(2 * i))
        samples = [
            Sample(prompt_id=p.id, text=f"ans {j}", token_ids=[1, 2], num_tokens=2, finish_reason=f, reward=r)
            for j, (r, f) in enumerate(zip(rs, fr, strict=True))
        ]
        groups.append(Group(prompt=p, samples=samples, pool_rewards=list(rs)))
    return StepBatch(groups, [np.zeros(len(r)) for r in rewards], np.ones(len(rewards)), Ledger())


def test_rows_take_the_first_sample_of_the_first_prompts_and_mark_clipped():
    b = _batch([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]], [["eos", "length"], ["length", "length"], ["eos", "eos"]])
    rows = sample_rows(7, b, k=2)
    assert [r["prompt_id"] for r in rows] == ["p0", "p1"] and all(r["step"] == 7 for r in rows)
    keys = ("prompt", "completion", "answer", "reward", "clipped", "finish_reason", "num_tokens")
    assert {k: rows[0][k] for k in keys} == {
        "prompt": "What is 0+0?",
        "completion": "ans 0",
        "answer": "0",
        "reward": 1.0,
        "clipped": False,
        "finish_reason": "eos",
        "num_tokens": 2,
    }
    assert rows[1]["clipped"] is True
    assert sample_rows(7, b, k=0) == [] and len(sample_rows(7, b, k=10)) == 3
    assert clipped_share(b) == pytest.approx(3 / 6)


def test_zero_reward_warning_blames_the_token_limit_or_the_verifier(tmp_path):
    kw = dict(max_new_tokens=8, verifier="exact", template="plain", run_dir=tmp_path)
    assert zero_reward_warning(1, _batch([[0.0, 1.0]], [["length", "length"]]), **kw) is None  # some signal
    cut = zero_reward_warning(1, _batch([[0.0, 0.0], [0.0, 0.0]], [["length"] * 2, ["length", "eos"]]), **kw)
    assert cut is not None and "all 4 rewards are 0" in cut and "75% of completions were cut" in cut
    assert "--generation.max_new_tokens" in cut and "task.verifier=exact" in cut and "task.template=plain" in cut
    assert "numeric" in cut and "chat" in cut and str(tmp_path / "samples.jsonl") in cut  # the choices, the file
    fmt = zero_reward_warning(1, _batch([[0.0, 0.0]], [["eos", "eos"]]), **kw)
    assert fmt is not None and "end on their own" in fmt and "may not read" in fmt and "max_new_tokens=8" in fmt


def _cfg(model_dir: Path, run_dir: Path, **sections) -> TrainConfig:
    sections = {**sections, "generation": {"max_new_tokens": 3, **sections.get("generation", {})}}
    return train_config(model_dir, run_dir, {"name": "uniform", "n": 2}, **sections)


def test_training_saves_samples_logs_clipped_share_and_warns_once(model_dir, tmp_path, capsys):
    from reinforce_ada.training.trainer import Trainer

    never = tmp_path / "never.py"
    never.write_text("def never(completion, answer):\n    return 0.0\n")
    run = tmp_path / "run"
    cfg = _cfg(model_dir, run, task={"verifier": f"{never}:never"}, run={"samples_per_step": 3})
    Trainer(cfg, tensorboard=False).fit()
    err = capsys.readouterr().err
    assert err.count("rewards are 0, so no sample shows the model a right answer") == 1  # once, on the first step
    assert f"(reinforce-ada samples {run})" in err  # the command a user has, not a module path
    assert "generation.max_new_tokens=3" in err and f"task.verifier={never}:never" in err
    rows = [json.loads(ln) for ln in (run / "samples.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1, 1, 2, 2, 2]
    assert all(r["reward"] == 0.0 and r["num_tokens"] <= 3 and r["clipped"] == (r["num_tokens"] == 3) for r in rows)
    metrics = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    shares = [m["completions_clipped_share"] for m in metrics if m["step"] > 0 and "loss" in m]
    assert len(shares) == 2 and all(0.0 <= s <= 1.0 for s in shares)

    # a second process resuming at step 1 drops the rows of step 2 before writing its own
    log = SampleLog(run, cfg)
    log._drop_from(2)
    assert [json.loads(ln)["step"] for ln in (run / "samples.jsonl").read_text().splitlines()] == [1, 1, 1]
    assert samples_log.main([str(run), "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- step 1  prompt") and "[completion]" in out and "[answer]" in out


def test_the_warning_names_the_task_default_verifier(tmp_path, capsys):
    cfg = apply_overrides(TrainConfig(), {"task": {"name": "file", "path": "x.jsonl"}}, "test")
    log = SampleLog(tmp_path, cfg)
    log.record(1, _batch([[0.0, 0.0]], [["length", "length"]]))
    assert "task.verifier=exact (the file task's default)" in capsys.readouterr().err


def test_samples_cli_errors_name_the_file(tmp_path, capsys):
    assert samples_log.main([str(tmp_path)]) == 2
    assert "samples.jsonl does not exist" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="samples_per_step=-1"):
        _cfg(tmp_path, tmp_path, run={"samples_per_step": -1})


def test_short_runs_cap_the_warm_up_and_eval_uses_the_set_temperature(model_dir, tmp_path, monkeypatch, capsys):
    from reinforce_ada.training import trainer as trainer_mod

    assert _cfg(model_dir, tmp_path, run={"steps": 5}).warmup_steps == 1  # a fifth of 5 steps, not the paper's 10
    assert _cfg(model_dir, tmp_path, run={"steps": 300}).warmup_steps == 10  # long runs keep optim.warmup_steps
    assert _cfg(model_dir, tmp_path, run={"steps": 4}).warmup_steps == 0

    temps = []
    real = trainer_mod.build_engine
    monkeypatch.setattr(
        trainer_mod, "build_engine", lambda name, spec, **kw: temps.append(spec.temperature) or real(name, spec, **kw)
    )
    cfg = _cfg(model_dir, tmp_path / "run", run={"steps": 5}, generation={"temperature": 0.7})
    t = trainer_mod.Trainer(cfg, tensorboard=False)
    assert "lr warm-up 1 steps" in capsys.readouterr().err  # stderr: stdout may be a command's JSON
    t.evaluate()
    assert temps == [0.7, 0.7]  # the rollout engine and the eval engine
    lrs = []
    for _ in range(2):
        lrs.append(t.train_step()["lr"])
    assert lrs == [pytest.approx(cfg.optim.lr / 2), pytest.approx(cfg.optim.lr)]  # the peak from step 2 of 5


def test_a_link_put_in_place_of_samples_jsonl_mid_run_is_refused_not_written_through(tmp_path):
    """Issue 40: samples.jsonl was opened with a plain append, so a symlink put there while a run went sent the later
    steps' rows outside the run folder. It is written as metrics.jsonl is now (O_NOFOLLOW)."""
    run, outside = tmp_path / "run", tmp_path / "outside.txt"
    run.mkdir()
    outside.write_text("mine\n")
    log = SampleLog(run, TrainConfig())
    b = _batch([[1.0]], [["eos"]])
    log.record(1, b)
    (run / "samples.jsonl").unlink()
    (run / "samples.jsonl").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        log.record(2, b)
    assert outside.read_text() == "mine\n"


def test_a_fifo_in_place_of_samples_jsonl_is_refused_without_blocking(tmp_path, capsys):
    import os

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "samples.jsonl")
    with pytest.raises(ConfigError, match="FIFO"):
        SampleLog(run, TrainConfig()).record(1, _batch([[1.0]], [["eos"]]))  # resuming reads it first
    with pytest.raises(ConfigError, match="FIFO"):
        gate.append_line(run / "samples.jsonl", "x\n")  # opened for writing with no reader
    assert samples_log.main([str(run)]) == 2
    assert "not a regular file (a FIFO" in capsys.readouterr().err


DAMAGED = [
    "[1, 2]",
    "3",
    "null",
    '{"prompt": "no step"}',
    '{"step": "7"}',
    '{"step": null}',
    '{"step": Infinity}',
    '{"step": NaN}',
    '{"step": 1.5}',
    "[" * 100_000 + "]" * 100_000,
    '{"step": 2, "prompt": "ok\u2028line\u0085next", "completion": "c", "reward": 1.0}',
    '{"step": 3, "prompt": "half',
]


def test_samples_reads_a_damaged_file_row_by_row(tmp_path, capsys):
    """Issue 40: `reinforce-ada samples` on a damaged samples.jsonl was a traceback (a row that is a list, a number or
    null; a missing, text, null, infinite or NaN step; deep nesting). Bad lines are skipped and counted; a raw
    U+2028 / U+0085 inside a string is valid JSON, not a line break."""
    from reinforce_ada.cli import main

    (tmp_path / "samples.jsonl").write_text("\n".join(DAMAGED) + "\n")
    assert main(["samples", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "ok\u2028line\u0085next" in out and "--- step 2" in out
    assert "skipped 11 line(s)" in err
    assert main(["samples", str(tmp_path), "--step", "5"]) == 1
    log = SampleLog(tmp_path, TrainConfig())
    log.record(3, _batch([[1.0]], [["eos"]]))  # a resume drops the bad lines and every row of step >= 3
    kept = (tmp_path / "samples.jsonl").read_text().split("\n")[:-1]
    assert [json.loads(x)["step"] for x in kept] == [2, 3]


def test_samples_on_a_folder_named_samples_jsonl_is_one_line(tmp_path, capsys):
    from reinforce_ada.cli import main

    (tmp_path / "samples.jsonl").mkdir()
    assert main(["samples", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
