"""The trainer end to end on a tiny random Llama folder: learning moves the weights, checkpoints resume exactly
after SIGKILL, faults are counted instead of crashing, and bad configuration is rejected with a clear message."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import switch
from reinforce_ada.training.config import TrainConfig, apply_overrides, load_toml, to_toml
from reinforce_ada.training.trainer import Row, Trainer


def small_cfg(model_dir: Path, run_dir: Path, **run) -> TrainConfig:
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 256, "eval_size": 4},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(run_dir), "steps": 3, "batch_size": 4, "eval_every": 0, "progress": False, **run},
            # a random model is rarely right: a high threshold-free exit keeps rounds short
            "strategy": {"samples_per_round": 4, "max_samples": 8},
        },
        "test",
    )
    return cfg


def train_keys(m: dict) -> dict:
    return {k: v for k, v in m.items() if not k.startswith("time_")}


def test_training_changes_every_trainable_parameter(model_dir, tmp_path):
    cfg = small_cfg(model_dir, tmp_path / "run", steps=2)
    cfg = dataclasses.replace(cfg, strategy=switch(cfg.strategy, "uniform", n=8))
    tr = Trainer(cfg, tensorboard=False)
    before = copy.deepcopy(tr.model.state_dict())
    # a verifier that rewards even-length completions gives every group signal
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    tr.fit()
    changed = [k for k, v in tr.model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    contract = {
        "step",
        "reward_first_round",
        "reward_trained",
        "samples_generated",
        "tokens_generated",
        "samples_trained",
        "zero_adv_prompt_share",
        "unresolved_prompts",
        "active_prompts_per_round",
        "rounds",
        "loss",
        "entropy",
        "grad_norm",
        "lr",
        "time_generate_s",
        "time_train_s",
        "time_step_s",
    }
    assert contract <= set(lines[1]) and "eval_accuracy" in lines[0] and "eval_accuracy" in lines[-1]
    assert (tmp_path / "run" / "checkpoints" / "latest").exists()


def test_micro_batches_accumulate_to_the_full_batch_gradient(model_dir, tmp_path):
    torch.manual_seed(0)
    rows = [Row([2, 5, 6], [7] * (1 + i % 3), [-1.0] * (1 + i % 3), float(i % 3 - 1), 1.0 + i % 2) for i in range(7)]
    grads = []
    for mbs in (7, 2):
        cfg = small_cfg(model_dir, tmp_path / f"r{mbs}")
        cfg = dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, micro_batch_size=mbs))
        tr = Trainer(cfg, tensorboard=False)
        tr.accumulate(rows)
        grads.append(torch.cat([p.grad.flatten() for p in tr.params]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_verifier_errors_are_counted_not_fatal(model_dir, tmp_path):
    tr = Trainer(small_cfg(model_dir, tmp_path / "run"), tensorboard=False)

    def broken(completion: str, answer: str) -> float:
        raise RuntimeError("verifier crashed")

    tr.verifier = broken
    m = tr.train_step()
    assert m["verifier_errors"] == m["samples_generated"] > 0 and m["reward_first_round"] == 0.0


def test_nan_loss_skips_the_update(model_dir, tmp_path):
    tr = Trainer(small_cfg(model_dir, tmp_path / "run"), tensorboard=False)
    before = copy.deepcopy(tr.model.state_dict())
    rows = [Row([2, 5], [7, 8], [float("nan"), -1.0], 1.0, 1.0), Row([2, 5], [7], [-1.0], -1.0, 1.0)]
    stats = tr.update(rows)
    assert stats["skipped_update"] == 1
    assert all(torch.equal(v, before[k]) for k, v in tr.model.state_dict().items())


def _run_cli(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "reinforce_ada.cli", "train", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(model_dir, tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    common = [
        "--model.path",
        str(model_dir),
        "--model.threads",
        "1",
        "--task.train_size",
        "256",
        "--task.eval_size",
        "4",
        "--generation.max_new_tokens",
        "4",
        "--batch-size",
        "8",
        "--eval-every",
        "0",
        "--save-every",
        "3",
        "--run.progress",
        "false",
        "--samples-per-round",
        "4",
        "--max-samples",
        "8",
        "--optim.warmup_steps",  # the warm-up is capped at a fifth of run.steps: 2 in both the 12-step and the long run
        "2",
    ]
    ref = _run_cli([*common, "--steps", "12", "--run-dir", str(tmp_path / "ref")], env)
    assert ref.wait(timeout=300) == 0, ref.stderr.read().decode()

    killed = _run_cli([*common, "--steps", "100000", "--run-dir", str(tmp_path / "k")], env)
    metrics = tmp_path / "k" / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 9:  # eval line + 8 steps
            break
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    resumed = _run_cli(["--resume", str(tmp_path / "k"), "--steps", "12", "--run.progress", "false"], env)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()

    def load(d: str) -> list[dict]:
        return [train_keys(json.loads(x)) for x in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]

    a, b = load("ref"), load("k")
    assert [m["step"] for m in b] == list(range(13))
    for x, y in zip(a[1:-1], b[1:-1], strict=True):  # the last step differs only by the final eval of `steps`
        assert x == y
    assert {k: v for k, v in a[-1].items() if not k.startswith("eval")} == {
        k: v for k, v in b[-1].items() if not k.startswith("eval")
    }


def test_config_toml_round_trip_and_errors(tmp_path):
    cfg = apply_overrides(TrainConfig(), {"optim": {"lr": 3e-4}, "strategy": {"exit": "positive", "k_pos": 2}}, "t")
    f = tmp_path / "c.toml"
    f.write_text(to_toml(cfg))
    assert load_toml(f) == cfg
    f.write_text("[optim]\nlrr = 1\n")
    with pytest.raises(ConfigError, match="optim.lrr.*valid keys"):
        load_toml(f)
    f.write_text("[optimizer]\nlr = 1\n")
    with pytest.raises(ConfigError, match="unknown section"):
        load_toml(f)
    f.write_text("[run]\nsteps = 'many'\n")
    with pytest.raises(ConfigError, match="run.steps"):
        load_toml(f)
    with pytest.raises(ConfigError, match="optim.agg"):
        apply_overrides(TrainConfig(), {"optim": {"agg": "sum"}}, "t")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train", "--optim.lr", "-1"], "optim.lr"),
        (["train", "--strategy", "grpo"], "uniform"),
        (["train", "--steps", "x"], "run.steps"),
        (["train", "--resume", "/nonexistent/run"], "config.toml"),
        (["train", "--config", "/nonexistent.toml"], "does not exist"),
        (["eval", "--checkpoint", "/nonexistent"], "no checkpoint"),
    ],
)
def test_cli_errors_name_the_field(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_eval_command_reports_ave_and_pass_at_k(model_dir, tmp_path, capsys):
    tr = Trainer(small_cfg(model_dir, tmp_path / "run", steps=1), tensorboard=False)
    tr.fit()
    assert main(["eval", "--checkpoint", str(tmp_path / "run"), "--samples", "2", "--json", "--threads", "1"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert 0.0 <= m["eval_accuracy"] <= m["eval_pass@2"] <= 1.0 and "eval_greedy_accuracy" in m
    assert m["eval_prompts"] == 7 * 4


@pytest.mark.parametrize("preset", sorted(Path(__file__).parents[1].glob("configs/*.toml")), ids=lambda p: p.name)
def test_presets_load(preset):
    cfg = load_toml(preset)
    assert cfg.run.steps >= 1


def test_existing_run_dir_is_never_mixed(model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    with pytest.raises(SystemExit) as e:
        main(["train", "--model.path", str(model_dir), "--run-dir", str(run)])
    assert e.value.code == 2 and "--resume" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "eval", "filter", "compare", "models", "plan", "simulate"])
def test_help_everywhere(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0 and "usage: reinforce-ada" in capsys.readouterr().out
