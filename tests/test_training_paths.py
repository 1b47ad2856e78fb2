"""Learning on the built-in task, the LoRA path, the CLI smoke run, file datasets and verifier faults."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import switch
from reinforce_ada.sampling.ledger import score
from reinforce_ada.tasks.files import load_prompts
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.trainer import Trainer
from reinforce_ada.types import Prompt, Sample
from tests.helpers import train_config


@pytest.mark.slow
def test_short_run_on_builtin_task_raises_reward(tmp_path, monkeypatch):
    # a short warm start (300 SFT steps) and a small pool of 1-digit sums, so 30 RL steps show learning
    monkeypatch.setenv("REINFORCE_ADA_CACHE", str(tmp_path / "cache"))
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"sft_steps": 300, "threads": 1},
            "task": {"train_size": 8, "eval_size": 16, "level_weights": [1, 0, 0, 0, 0, 0, 0]},
            "optim": {"lr": 1e-3},
            "run": {"run_dir": str(tmp_path / "run"), "batch_size": 8, "progress": False},
        },
        "test",
    )
    tr = Trainer(cfg, tensorboard=False)
    rewards = [tr.train_step()["reward_first_round"] for _ in range(30)]
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5]) + 0.15


def tiny_cfg(model_dir, run_dir, **model):
    return train_config(model_dir, run_dir, {"name": "uniform", "n": 8}, model=model)


def test_lora_trains_only_the_adapter_and_resumes(model_dir, tmp_path):
    tr = Trainer(tiny_cfg(model_dir, tmp_path / "run", lora_r=4), tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    tr.fit()
    after = tr.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed)
    ckpt = tmp_path / "run" / "checkpoints" / "step_000002" / "model"
    assert (ckpt / "adapter_model.safetensors").exists() and not (ckpt / "model.safetensors").exists()
    again = Trainer(tiny_cfg(model_dir, tmp_path / "run", lora_r=4), tensorboard=False)
    assert again.resume() and again.step == 2
    assert all(torch.equal(v, after[k]) for k, v in again.model.state_dict().items())


def test_bf16_autocast_step_runs(model_dir, tmp_path):
    tr = Trainer(tiny_cfg(model_dir, tmp_path / "run", bf16=True), tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m = tr.train_step()
    assert m["skipped_update"] == 0 and np.isfinite(m["grad_norm"])


@pytest.mark.slow
def test_cli_smoke_changes_parameters(model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    argv = [
        "train",
        "--model.path",
        str(model_dir),
        "--model.threads",
        "1",
        "--task.train_size",
        "64",
        "--task.eval_size",
        "2",
        "--generation.max_new_tokens",
        "4",
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--run-dir",
        str(run),
        "--run.progress",
        "false",
        "--strategy",
        "uniform",
        "--n",
        "8",
        "--task.verifier",
        "tests.helpers:even_length",
        "--optim.lr",
        "1e-2",
    ]
    assert main(argv) == 0
    assert "report.png" in capsys.readouterr().out and (run / "report.png").exists()
    start, end = (
        load_file(str(model_dir / "model.safetensors")),
        load_file(str(run / "checkpoints/step_000002/model/model.safetensors")),
    )
    assert any(not torch.equal(start[k], end[k]) for k in end)
    assert (run / "tensorboard").is_dir() and (run / "config.toml").exists()


def test_file_dataset_rows_and_errors(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text('{"question": "1+1=", "gold": "2"}\n{"question": "2+2=", "gold": "4", "id": "x"}\n')
    ps = load_prompts(f, prompt_key="question", answer_key="gold")
    assert [(p.id, p.text, p.answer) for p in ps] == [("d-000001", "1+1=", "2"), ("x", "2+2=", "4")]
    f.write_text('{"question": "1+1=", "gold": "2"}\n{"question": "", "gold": "4"}\n')
    with pytest.raises(ConfigError, match=r"row 2: its prompt \('question'\) is empty; give it one or remove the row"):
        load_prompts(f, prompt_key="question", answer_key="gold")
    c = tmp_path / "d.csv"
    c.write_text("prompt,answer\n3+4=,7\n5+5=,\n")
    with pytest.raises(ConfigError, match=r"row 2: its answer \('answer'\) is empty"):
        load_prompts(c)
    c.write_text("prompt,gold\n3+4=,7\n")  # a column named otherwise: the flag that names it
    with pytest.raises(ConfigError, match=r"row 1 has no 'answer' column; its fields are \['gold', 'prompt'\]"):
        load_prompts(c)
    with pytest.raises(ConfigError, match="does not exist"):
        load_prompts(tmp_path / "missing.jsonl")


def test_file_task_trains_end_to_end(model_dir, tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"<bos>{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(20)))
    cfg = tiny_cfg(model_dir, tmp_path / "run")
    cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, name="file", path=str(data), eval_size=4))
    tr = Trainer(cfg, tensorboard=False)
    assert len(tr.train_prompts) == 16 and len(tr.eval_prompts) == 4
    last = tr.fit()
    assert last["step"] == 2 and "eval_accuracy" in last


def test_verifier_timeout_scores_zero_and_counts():
    def slow(completion: str, answer: str) -> float:
        time.sleep(0.5)
        return 1.0

    samples = [Sample("a", text="1"), Sample("a", text="2")]
    errors = score(samples, {"a": Prompt(id="a", text="", answer="1")}, slow, timeout_s=0.05)
    assert errors == 2 and [s.reward for s in samples] == [0.0, 0.0]


def test_verifier_registry():
    from reinforce_ada.tasks import verifiers

    assert verifiers.get("numeric")("the answer is 1,250.", "1250") == 1.0
    assert verifiers.get("exact")(" 7 ", "7") == 1.0
    assert verifiers.get("tests.helpers:even_length")("ab", "") == 1.0
    with pytest.raises(ConfigError, match="exact"):
        verifiers.get("nope")
    with pytest.raises(ConfigError, match="could not be imported"):
        verifiers.get("no.such.module:fn")


def test_streaming_trainer_step(model_dir, tmp_path):
    cfg = tiny_cfg(model_dir, tmp_path / "run")
    cfg = dataclasses.replace(
        cfg,
        strategy=switch(cfg.strategy, "seq", samples_per_round=4, max_samples=8),
        generation=dataclasses.replace(cfg.generation, streaming=True, slots=16, prefetch=True),
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m = tr.train_step()
    assert "cancelled_samples" in m and m["samples_generated"] >= 4 * 4
    assert all(len(g.pool_rewards) <= 8 for g in tr.strategy.build())


def test_model_path_folder_or_hub_id(tmp_path):
    from reinforce_ada.training.config import ModelConfig, TaskConfig
    from reinforce_ada.training.warm_start import resolve_model_path

    assert (
        str(resolve_model_path(ModelConfig(path="HuggingFaceTB/SmolLM2-135M-Instruct"), TaskConfig())).count("/") == 1
    )
    with pytest.raises(ConfigError, match="no config.json"):
        resolve_model_path(ModelConfig(path=str(tmp_path)), TaskConfig())


def test_device_and_engine_errors():
    from reinforce_ada.models.load import resolve_device
    from reinforce_ada.training.config import GenerationConfig

    assert resolve_device("cpu").type == "cpu" and resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ConfigError, match="model.device"):
        resolve_device("tpu")
    with pytest.raises(ConfigError, match="generation.engine"):
        GenerationConfig(engine="sglang")
    # the vLLM engine speaks the streaming protocol too (issue 12): no longer an error
    assert GenerationConfig(engine="vllm", streaming=True).streaming is True


@pytest.mark.parametrize(
    ("strategy", "generation", "engine", "streams"),
    [
        ({"name": "seq"}, {}, "SlotEngine", True),
        ({"name": "est"}, {}, "SlotEngine", True),
        ({"name": "uniform"}, {}, "SlotEngine", False),
        ({"name": "seq"}, {"decode": "hf"}, "HFStreamEngine", True),
        ({"name": "seq"}, {"decode": "hf", "streaming": False}, "HFEngine", False),
    ],
)
def test_trainer_engine_and_mode(model_dir, tmp_path, strategy, generation, engine, streams):
    cfg = tiny_cfg(model_dir, tmp_path / "run")
    cfg = apply_overrides(cfg, {"strategy": strategy, "generation": generation}, "test")
    tr = Trainer(cfg, tensorboard=False)
    assert type(tr.engine).__name__ == engine and cfg.streaming is streams
    m = tr.train_step()
    assert ("cancelled_samples" in m) is streams  # the streaming ledger's extras reach the metrics
    assert m["samples_generated"] > 0 and np.isfinite(m["loss"])
