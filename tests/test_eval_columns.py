"""`eval --checkpoint RUN --dataset FILE` reads FILE with the run's column names; a missing column names the flag."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada.cli import main
from reinforce_ada.engines import local_engine
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.exact import answer_ids, answer_logprobs, exact_pass_rates, summarize_exact
from reinforce_ada.evaluation.metrics import sample_correct
from reinforce_ada.tasks import arithmetic
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.trainer import Trainer
from reinforce_ada.training.warm_start import SHIPPED_DIR
from reinforce_ada.types import Prompt


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


# -- eval guards ------------------------------------------------------------------------------------------------------
# Issue 40: `eval` of a model that cannot be sampled safely is one line naming it, not a traceback: weights that hold
# NaN, weights that are pickles (never loaded: unpickling can run code), a checkpoint whose `model/` is a link, and a
# checkpoint whose files changed since it was saved (its manifest's checksums).
FLAGS = ["--samples", "1", "--max-new-tokens", "2", "--no-greedy", "--threads", "1"]


def run_eval(tmp_path: Path, capsys, *which: str) -> str:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n")
    with pytest.raises(SystemExit) as e:
        main(["eval", *which, "--dataset", f"d={data}", *FLAGS])
    assert e.value.code == 2
    return capsys.readouterr().err


def test_nan_weights_are_refused_naming_a_parameter(model_dir, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "nan"
    shutil.copytree(model_dir, folder)
    weights = load_file(str(folder / "model.safetensors"))
    name = next(iter(weights))
    weights[name][:] = float("nan")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    err = run_eval(tmp_path, capsys, "--model", str(folder))
    assert "the model's weights hold NaN or inf" in err and "Traceback" not in err


class Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickled_weights_are_never_loaded(model_dir, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "pickled"
    shutil.copytree(model_dir, folder)
    (folder / "model.safetensors").unlink()
    torch.save({"w": Evil()}, folder / "pytorch_model.bin")
    monkeypatch.chdir(tmp_path)
    err = run_eval(tmp_path, capsys, "--model", str(folder))
    assert "holds its weights as pickles (pytorch_model.bin)" in err and not (tmp_path / "PWNED").exists()


def test_a_checkpoint_whose_model_is_a_link_is_refused(model_dir, tmp_path, capsys):
    ckpt = tmp_path / "run" / "checkpoints" / "step_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "model").symlink_to(model_dir)
    (ckpt / "manifest.json").write_text(json.dumps({"step": 1, "sha256": {}}))
    for path in (ckpt, tmp_path / "run"):  # the checkpoint itself, and a run folder whose latest it is
        err = run_eval(tmp_path, capsys, "--checkpoint", str(path))
        assert "model is a symbolic link" in err and "a checkpoint holds none" in err


def test_a_checkpoint_whose_weights_were_replaced_fails_its_checksum(model_dir, tmp_path, capsys):
    from reinforce_ada.training.checkpoint import sha256

    ckpt = tmp_path / "step_000001"
    shutil.copytree(model_dir, ckpt / "model")
    files = {str(p.relative_to(ckpt)): sha256(p) for p in ckpt.rglob("*") if p.is_file()}
    (ckpt / "manifest.json").write_text(json.dumps({"step": 1, "sha256": files}))
    (ckpt / "model" / "model.safetensors").unlink()
    torch.save({"w": Evil()}, ckpt / "model" / "model.safetensors")  # a pickle under the safetensors name
    err = run_eval(tmp_path, capsys, "--checkpoint", str(ckpt))
    assert "model/model.safetensors does not match its checksum" in err


# -- exact eval -------------------------------------------------------------------------------------------------------
# Exact evaluation: the pass rate at temperature T from one forward pass, checked against sampling.
def P(a: int, b: int, level: int = 1) -> Prompt:
    return arithmetic.make_prompt(a, b, level, f"p{a}-{b}")


@pytest.fixture(scope="module")
def warm():
    """The shipped warm start: a model with pass rates between 0 and 1 (package data, no training)."""
    return AutoModelForCausalLM.from_pretrained(SHIPPED_DIR).eval(), AutoTokenizer.from_pretrained(SHIPPED_DIR)


def test_answer_ids_add_eos_unless_the_answer_fills_the_limit(char_tokenizer):
    tok = char_tokenizer
    ids = answer_ids(tok, [P(12, 30), P(999, 1)], max_new_tokens=4)
    assert ids[0] == tok.encode("42") + [tok.eos_token_id]
    assert ids[1] == tok.encode("1000")  # 4 tokens fill the limit: cut by length, no EOS, still accepted
    assert answer_ids(tok, [P(999, 1)], max_new_tokens=3) == [None]
    rates = exact_pass_rates(AutoModelForCausalLM.from_pretrained(SHIPPED_DIR), tok, [P(999, 1)], max_new_tokens=3)
    assert rates.tolist() == [0.0]


def test_matches_the_product_of_next_token_probabilities(tiny_llama, char_tokenizer):
    tok, model = char_tokenizer, tiny_llama
    prompts = [P(3, 4), P(12, 30, 2), P(7, 8)]
    got = answer_logprobs(model, tok, prompts, temperature=0.7, batch_size=2)
    for p, lp in zip(prompts, got, strict=True):
        seq = tok.encode(p.text)
        total = 0.0
        for t in tok.encode(p.answer) + [tok.eos_token_id]:  # one token at a time, no padding, no batching
            with torch.no_grad():
                logits = model(torch.tensor([seq])).logits[0, -1].double() / 0.7
            total += float(torch.log_softmax(logits, -1)[t])
            seq.append(t)
        assert lp == pytest.approx(total, abs=1e-4)  # float32 batched vs one-at-a-time: ~1e-5 apart on some CPUs


def test_agrees_with_sampled_accuracy_within_monte_carlo_error(warm):
    model, tok = warm
    torch.set_num_threads(1)
    prompts = [P(a, b, 2 + (a > 50)) for a, b in ((12, 34), (58, 67), (45, 55), (73, 19), (66, 77), (81, 9))]
    for temp, decode in ((1.0, "auto"), (0.7, "hf")):  # the trainer's SlotEngine, and HFEngine
        exact = exact_pass_rates(model, tok, prompts, temperature=temp, max_new_tokens=8)
        assert 0.05 < exact.mean() < 0.95  # a model that is neither always right nor always wrong
        eng = local_engine(
            model,
            tok,
            decode=decode,
            streaming=False,
            slots=256,
            batch_size=512,
            max_new_tokens=8,
            temperature=temp,
            seed=3,
        )
        correct, errors = sample_correct(eng, prompts, arithmetic.verify, samples=800)
        sampled = np.array([np.mean(correct[p.id]) for p in prompts])
        se = np.sqrt(np.clip(exact * (1 - exact), 1e-4, None) / 800)
        assert errors == 0
        assert np.all(np.abs(sampled - exact) < 4.5 * se), (temp, sampled, exact)
        pooled_se = np.sqrt(np.sum(exact * (1 - exact) / 800)) / len(prompts)
        assert abs(sampled.mean() - exact.mean()) < 4 * pooled_se


def test_summarize_exact_weights_levels():
    prompts = [P(1, 1, 1), P(2, 2, 1), P(10, 10, 2)]
    m = summarize_exact(prompts, [1.0, 0.5, 0.1], {1: 1.0, 2: 3.0})
    assert m["eval_accuracy"] == pytest.approx(1.6 / 3)
    assert m["eval_accuracy_L1"] == pytest.approx(0.75) and m["eval_accuracy_L2"] == pytest.approx(0.1)
    assert m["eval_accuracy_weighted"] == pytest.approx((0.75 + 3 * 0.1) / 4)
    with pytest.raises(ConfigError, match="levels"):
        summarize_exact(prompts, [1.0, 0.5, 0.1], {3: 1.0})
    with pytest.raises(ConfigError, match="one pass rate per prompt"):
        summarize_exact(prompts, [1.0], None)
