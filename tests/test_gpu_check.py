"""benchmarks/gpu_check.py at toy sizes on the CPU: every section runs (the GPU run is the same code on CUDA)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(SCRIPT.parent))  # as `python benchmarks/gpu_check.py` has it: its siblings import
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # the trainer's verifier is `gpu_check:synthetic_reward`
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_check", None)
    sys.path.remove(str(SCRIPT.parent))


def test_synthetic_reward_pass_rate_follows_the_answer(gpu_check):
    # a bucket's pass rate: the share of distinct completions whose hash falls below it
    for answer in ("3", "17", "42", "108", "999"):
        rate = gpu_check.RATES[gpu_check.zlib.crc32(answer.encode()) % len(gpu_check.RATES)]
        mean = sum(gpu_check.synthetic_reward(f"completion {i}", answer) for i in range(4000)) / 4000
        assert abs(mean - rate) < 0.03, (answer, rate, mean)


def test_padded_tokenizer_keeps_the_char_ids(gpu_check):
    from reinforce_ada.models.tiny import build_char_tokenizer

    tok = gpu_check.padded_char_tokenizer(300, 128)
    assert len(tok) == 300
    text = "<bos>12+34=46<eos>"
    assert tok.encode(text) == build_char_tokenizer().encode(text)
    assert tok.decode([2, 5, 299, 1], skip_special_tokens=True) == "1<t299>"
    with pytest.raises(ValueError, match="vocab_size=5"):
        gpu_check.padded_char_tokenizer(5, 128)


@pytest.mark.slow
def test_tiny_run_measures_every_section(gpu_check, tmp_path):
    assert gpu_check.main(["--tiny", "--device", "cpu", "--big", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert (tmp_path / "gpu_check.png").stat().st_size > 0
    assert res["env"]["device"] == "cpu" and res["env"]["torch"]
    for key, dtypes in (("generation", ("float32", "bfloat16")), ("generation_big", ("bfloat16",))):
        for dtype in dtypes:
            for name, p, k in gpu_check.TINY.workloads[: 2 if key == "generation" else 1]:
                cell = res[key][dtype][name]
                assert cell["engine_class"] == "SlotEngine" and cell["rows"] == p * k
                for side in ("engine", "hf_engine", "generate"):
                    assert len(cell[side]["seconds"]) == gpu_check.TINY.repeats
                    assert 0 < cell[side]["min"] <= cell[side]["tokens_per_s"] <= cell[side]["max"]
                    assert all(0 < t <= p * k * gpu_check.TINY.max_new_tokens for t in cell[side]["tokens"])
    t = res["training"]
    assert t["steps_timed"] == gpu_check.TINY.steps
    assert set(t["median"]) == set(gpu_check.TRAIN_ARMS)
    assert set(t["engines"].values()) == {"SlotEngine"}
    for arm, m in t["median"].items():
        assert m["time_step_s"] >= m["time_generate_s"] > 0, arm
        # GRPO-n4 samples exactly n per prompt; Ada-Seq at least its first round of M=8
        low = 4 if arm.startswith("grpo") else 8
        assert m["samples_generated"] >= low * gpu_check.TINY.train_batch, arm
        assert m["samples_trained"] == 4 * gpu_check.TINY.train_batch, arm
    # fp32 sampler and learner agree to float rounding; bf16 autocast in the learner does not
    assert t["median"]["grpo-n4"]["mismatch_logp_abs_max"] < 1e-4
    assert t["median"]["grpo-n4 bf16"]["mismatch_logp_abs_max"] > t["median"]["grpo-n4"]["mismatch_logp_abs_max"]
    paths = t["paths"]
    assert all(p["ok"] for p in paths.values()), paths
    assert (
        paths["resume_and_step"]["result"]["resumed"]
        and paths["resume_and_step"]["result"]["weights_equal_after_resume"]
    )
    assert paths["evaluate"]["result"]["eval_prompts"] > 0


def test_no_cuda_or_no_transformers_is_a_clear_exit(gpu_check, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--tiny", "--device", "cuda", "--out", str(tmp_path)]) == 2
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "CUDA is not available" in res["error"] and "generation" not in res
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    assert gpu_check.main(["--tiny", "--out", str(tmp_path)]) == 2
    assert "transformers is not installed" in json.loads((tmp_path / "gpu_check.json").read_text())["error"]
    assert "transformers is not installed" in capsys.readouterr().out
