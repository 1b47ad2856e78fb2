"""Shared fixtures: the char-level tokenizer, a tiny random Llama on CPU and that model saved as a folder
(session-scoped: do not mutate them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from reinforce_ada.models.tiny import build_char_tokenizer
from tests import helpers

# tensors here are tiny: extra threads only add overhead (and the CI box is shared)
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def char_tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama(char_tokenizer) -> LlamaForCausalLM:
    """A seeded random Llama (hidden 32, 2 layers, 2 heads, tied embeddings; `tests.helpers.tiny_llama`), eval mode."""
    return helpers.tiny_llama(char_tokenizer).eval()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tiny_llama, char_tokenizer) -> Path:
    """`tiny_llama` and its tokenizer saved as a Hugging Face folder (what `model.path` takes)."""
    d = tmp_path_factory.mktemp("tiny_model")
    tiny_llama.save_pretrained(d)
    char_tokenizer.save_pretrained(d)
    return d


@pytest.fixture(autouse=True)
def _stays_in_its_temporary_folder(request):
    """Tests write only under their temporary folders: a `runs/` appearing in the working directory (a command's
    default output, as `compare`'s runs/compare/) fails the test that made it (issue 40)."""
    runs = Path.cwd() / "runs"
    existed = runs.exists()
    yield
    if not existed and runs.exists():
        import shutil

        shutil.rmtree(runs, ignore_errors=True)
        pytest.fail(f"{request.node.nodeid} wrote {runs}: pass it a tmp_path (or monkeypatch.chdir(tmp_path))")
