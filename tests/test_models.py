"""Real models offline: SmolLM2-135M-Instruct from a PyPI wheel, converted from GGUF to a trainable fp32 folder."""

from __future__ import annotations

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
