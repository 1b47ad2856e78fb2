"""Load a policy from a Hugging Face folder: fp32 master weights, LoRA-wrapped through peft when asked, on a device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.config import ModelConfig


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
