"""`eval --checkpoint RUN --dataset FILE` reads FILE with the run's column names; a missing column names the flag."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.cli import main
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.trainer import Trainer


def rows(path, n, keys=("q", "a")):
    path.write_text("".join(json.dumps({keys[0]: f"{i}+1=", keys[1]: str(i + 1)}) + "\n" for i in range(n)))
    return path


@pytest.mark.slow
def test_eval_reuses_the_run_columns_and_names_the_flag_when_one_is_missing(model_dir, tmp_path, capsys):
    train, held = rows(tmp_path / "train.jsonl", 8), rows(tmp_path / "held.jsonl", 4)
    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"name": "file", "path": str(train), "eval_path": str(held), "prompt_key": "q", "answer_key": "a"},
            "generation": {"max_new_tokens": 3},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 2, "eval_every": 0, "progress": False},
            "strategy": {"name": "uniform", "n": 2},
        },
        "test",
    )
    Trainer(cfg, tensorboard=False).fit()
    other = rows(tmp_path / "other.jsonl", 3)
    assert (
        main(
            [
                "eval",
                "--checkpoint",
                str(tmp_path / "run"),
                "--dataset",
                str(other),
                "--samples",
                "1",
                "--threads",
                "1",
                "--json",
                "--no-greedy",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["datasets"]["other"]["eval_prompts"] == 3
    plain = rows(tmp_path / "plain.jsonl", 3, keys=("question", "gold"))
    with pytest.raises(SystemExit) as e:
        main(["eval", "--checkpoint", str(tmp_path / "run"), "--dataset", str(plain), "--threads", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--prompt-key" in err and "'q'" in err


def test_eval_refuses_a_verifier_that_cannot_score_the_dataset(model_dir, capsys):
    with pytest.raises(SystemExit) as e:
        main(["eval", "--model", str(model_dir), "--dataset", "arithmetic", "--verifier", "code", "--threads", "1"])
    assert e.value.code == 2 and "cannot be scored by verifier 'code'" in capsys.readouterr().err


def test_eval_shows_progress_per_chunk_of_prompts(model_dir, tmp_path, capsys):
    data = rows(tmp_path / "d.jsonl", 20, keys=("prompt", "answer"))
    assert (
        main(
            [
                "eval",
                "--model",
                str(model_dir),
                "--dataset",
                str(data),
                "--samples",
                "1",
                "--threads",
                "1",
                "--max-new-tokens",
                "2",
                "--no-greedy",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "0/20" in err and "20/20" in err and "prompt/s" in err  # a bar over prompts, with a rate and ETA


def test_eval_keeps_and_shows_scored_completions(model_dir, tmp_path, capsys):
    data = rows(tmp_path / "d.jsonl", 4, keys=("prompt", "answer"))
    argv = ["eval", "--model", str(model_dir), "--dataset", str(data), "--samples", "2", "--threads", "1"]
    assert main([*argv, "--max-new-tokens", "2", "--no-greedy", "--json", "--show-samples", "1"]) == 0
    out = capsys.readouterr()
    kept = json.loads(out.out)["examples"]["d"]
    assert len(kept) == 3 and {"prompt", "completion", "answer", "reward"} <= set(kept[0])
    assert out.err.count("[completion]") == 1 and kept[0]["prompt"] in out.err
