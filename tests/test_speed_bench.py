"""benchmarks/speed.py: the P6 measurement on a tiny random model, token counting, argument errors, TRL's P5 side."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from benchmarks import harness
from reinforce_ada.types import Prompt

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "speed.py"


@pytest.fixture(scope="module")
def speed():
    return importlib.import_module("benchmarks.speed")


def test_real_tokens_counts_through_first_eos(speed):
    eos = 1
    ids = torch.tensor([[5, 6, eos, 0], [5, eos, 0, 0], [5, 6, 7, 8], [eos, 0, 0, 0]])
    assert harness.real_tokens(ids, [eos]) == 3 + 2 + 4 + 1
    assert harness.real_tokens(ids[:, :0], [eos]) == 0


@pytest.mark.slow
def test_measure_generation_reports_both_sides(speed, tiny_llama, char_tokenizer):
    prompts = [Prompt(f"p{i}", f"<bos>{i}+{i + 1}=") for i in range(3)]
    was_training = tiny_llama.training
    res = speed.measure_generation(tiny_llama, char_tokenizer, prompts, samples=2, max_new_tokens=4, repeats=1)
    assert tiny_llama.training == was_training
    assert res["rows"] == 6 and res["ratio_tokens_per_s"] > 0
    for side in ("engine", "generate"):
        r = res[side]
        for key in ("tokens_per_s", "seconds_median", "peak_rss_mib", "tokens_per_row_mean"):
            assert r[key] > 0, (side, key)
        assert r["peak_rss_delta_mib"] >= 0
        assert len(r["tokens_all"]) == 1 and 6 <= r["tokens_all"][0] <= 6 * 4


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--repeats", "-1"], ["--wait-idle", "-5"], ["--bogus"]])
def test_bad_arguments_exit_nonzero(speed, argv, capsys):
    with pytest.raises(SystemExit) as e:
        speed.parse_args(argv)
    assert e.value.code != 0
    assert "error" in capsys.readouterr().err


def test_trl_reward_is_our_verifier(speed):
    assert speed.arithmetic_reward(["579", " 57", "579<eos>"], ["579", "579", "579"]) == [1.0, 0.0, 1.0]


@pytest.mark.slow
def test_trl_step_runs_on_the_tiny_model(speed, tmp_path, char_tokenizer, tiny_llama):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    tiny_llama.save_pretrained(tmp_path)
    char_tokenizer.save_pretrained(tmp_path)
    prompts = [Prompt(f"p{i}", f"<bos>{i}+{i}=", answer=str(2 * i)) for i in range(16)]
    s = speed.Settings(batch_prompts=2, group=2, max_new_tokens=3, warmup_steps=1, steps=2, rounds=1, threads=1)
    r = speed.trl_steps(s, tmp_path, prompts)
    assert len(r["step_s"]) == 2 and all(t > 0 for t in r["step_s"])
    assert len(r["generate_s"]) == 2 and all(0 < g < t for g, t in zip(r["generate_s"], r["step_s"], strict=True))
