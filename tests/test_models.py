"""Real models offline: SmolLM2-135M-Instruct from a PyPI wheel, converted from GGUF to a trainable fp32 folder."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import left_pad, right_pad, sequence_logprobs
from reinforce_ada.models.gguf import fetch_smollm2
from reinforce_ada.models.load import load_policy
from reinforce_ada.training.config import ModelConfig


@pytest.mark.slow
def test_smollm2_folder_loads_trains_and_generates(tmp_path):
    pytest.importorskip("gguf")
    try:
        out = fetch_smollm2(tmp_path / "smollm2")
    except ConfigError as e:  # no PyPI here: nothing to test against
        pytest.skip(str(e))
    model, tok = load_policy(out, ModelConfig(path=str(out)))
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert not hasattr(model.config, "quantization_config")  # trainable and saveable
    from reinforce_ada.engines.hf import HFEngine
    from reinforce_ada.types import Prompt, Request

    eng = HFEngine(model, tok, max_new_tokens=4, temperature=0.0)
    (s,) = eng.generate([Request(Prompt(id="q", text="What is 2+2?"), 1)])
    assert 1 <= s.num_tokens <= 4 and len(s.logprobs) == s.num_tokens


def test_models_cli_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        main(["models", "smollm2", "--out", str(tmp_path)])
    assert e.value.code == 2 and "--force" in capsys.readouterr().err


# --- issue 25: a model path that is not there, and no deprecation noise from our own calls ---------------------


def test_missing_local_model_folder_fails_at_once_without_the_hub(tmp_path, monkeypatch):
    from reinforce_ada.models.load import check_model_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "smollm2").mkdir(parents=True)
    (tmp_path / "models" / "smollm2" / "config.json").write_text("{}")
    for local in ("models/your-model", "./my-model", str(tmp_path / "nope"), "a/b/c"):
        with pytest.raises(ConfigError, match="folder not found") as e:
            check_model_path(local)
        assert repr(local) in str(e.value) and "reinforce-ada models smollm2 --out" in str(e.value)
    with pytest.raises(ConfigError, match="model folders in models/: smollm2"):
        check_model_path("models/your-model")  # names the model folders next to the missing one
    assert check_model_path("models/smollm2") == Path("models/smollm2")
    (tmp_path / "weights.bin").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        check_model_path("weights.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no config.json"):
        check_model_path("empty")
    assert str(check_model_path("HuggingFaceTB/SmolLM2-135M-Instruct")) == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_train_cli_names_the_missing_model_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["train", "--task.name", "code", "--model.path", "models/your-model", "--steps", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "folder not found" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run folder left behind


def test_lora_policy_forward_raises_no_future_warnings(tiny_llama, char_tokenizer, tmp_path):
    """`past_key_values` through a PeftModel and peft's read of `is_gradient_checkpointing` both warned (issue 25)."""
    import warnings

    pytest.importorskip("peft")
    from reinforce_ada.models.forward import left_pad, model_forward, position_ids_from_mask, sequence_logprobs

    tiny_llama.save_pretrained(tmp_path)
    char_tokenizer.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        model, _ = load_policy(tmp_path, ModelConfig(path=str(tmp_path), lora_r=4))
        ids_BL, mask_BL = left_pad([[5, 6, 7], [8, 9]], char_tokenizer.pad_token_id)
        logits, cache = model_forward(model, ids_BL, mask_BL, position_ids_from_mask(mask_BL), use_cache=True)
        logp, mask, _ = sequence_logprobs(model, [[5, 6, 7]], [[8, 9]], char_tokenizer.pad_token_id)
    assert logits.shape[:2] == (2, 3) and cache is not None and cache.get_seq_length() == 3
    assert logp.shape == (1, 2) and bool(mask.all())


# --- (was tests/test_policy.py) ---------------------------------------------------------------------------------------
# `models.forward`: padded sequence log-probs and entropies against an unpadded forward per row.


PROMPTS = [[2, 5, 6, 14], [2, 9], [2, 7, 7, 7, 8, 17]]
COMPLETIONS = [[8, 9, 1], [10], [4, 5, 6, 7, 8]]


def _one_row(model, prompt, completion, temperature):
    """Reference: an unpadded forward over one row."""
    ids = torch.tensor([prompt + completion])
    logits_LV = model(input_ids=ids).logits[0].float() / temperature
    logp_LV = logits_LV.log_softmax(-1)
    pred_TV = logp_LV[len(prompt) - 1 : len(prompt) + len(completion) - 1]
    logp_T = pred_TV.gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1)
    entropy_T = -(pred_TV.exp() * pred_TV).sum(-1)
    return logp_T, entropy_T


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_matches_unpadded_forward_per_row(tiny_llama, temperature):
    with torch.no_grad():
        logp_BT, mask_BT, entropy_BT = sequence_logprobs(
            tiny_llama, PROMPTS, COMPLETIONS, 0, temperature=temperature, with_entropy=True
        )
    assert logp_BT.shape == mask_BT.shape == entropy_BT.shape == (3, 5)
    assert mask_BT.dtype == torch.bool
    assert mask_BT.sum(-1).tolist() == [len(c) for c in COMPLETIONS]
    for b, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS, strict=True)):
        with torch.no_grad():
            want_logp_T, want_entropy_T = _one_row(tiny_llama, p, c, temperature)
        assert torch.allclose(logp_BT[b, : len(c)], want_logp_T, atol=1e-5)
        assert torch.allclose(entropy_BT[b, : len(c)], want_entropy_T, atol=1e-5)
        assert (logp_BT[b, len(c) :] == 0).all() and (entropy_BT[b, len(c) :] == 0).all()


def test_gradient_flows(tiny_llama):
    model = copy.deepcopy(tiny_llama)
    logp_BT, mask_BT, entropy_BT = sequence_logprobs(model, PROMPTS, COMPLETIONS, 0, with_entropy=True)
    (logp_BT.sum() + entropy_BT.sum()).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_empty_completions(tiny_llama):
    logp_BT, mask_BT, entropy_BT = sequence_logprobs(tiny_llama, PROMPTS[:2], [[], []], 0)
    assert logp_BT.shape == mask_BT.shape == (2, 0) and entropy_BT is None


def test_bad_inputs_raise(tiny_llama):
    with pytest.raises(ValueError, match="prompts"):
        sequence_logprobs(tiny_llama, PROMPTS, COMPLETIONS[:2], 0)
    with pytest.raises(ValueError, match="temperature"):
        sequence_logprobs(tiny_llama, PROMPTS, COMPLETIONS, 0, temperature=0.0)
    with pytest.raises(ValueError, match="at least one token"):
        sequence_logprobs(tiny_llama, [[], [2]], [[3], [4]], 0)


def test_pad_helpers():
    ids_BL, mask_BL = left_pad([[1, 2], [3]], pad_id=9)
    assert ids_BL.tolist() == [[1, 2], [9, 3]] and mask_BL.tolist() == [[1, 1], [0, 1]]
    vals_BT, mask_BT = right_pad([[0.5], [], [1.0, 2.0]], value=-1.0)
    assert vals_BT.tolist() == [[0.5, -1.0], [-1.0, -1.0], [1.0, 2.0]]
    assert mask_BT.tolist() == [[True, False], [False, False], [True, True]]
