"""Load a policy from a Hugging Face folder: fp32 master weights, LoRA-wrapped through peft when asked, on a device.

`check_model_path` decides what `model.path` names before anything is loaded. A folder on this machine is read with
`local_files_only` (the hub is never contacted for it, as under HF_HUB_OFFLINE); a path that looks local but is not
there fails at once with "folder not found" instead of transformers retrying the hub for half a minute. Only a bare
`org/name` that is not on disk is taken for a hub id.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.config import ModelConfig

LOCAL_ROOTS = ("models", "runs", "checkpoints")
"""First path parts that name this project's own folders (`reinforce-ada models` writes under models/): a missing
`models/x` is a missing folder, not a hub id."""


def check_model_path(path: str) -> Path:
    """`model.path` -> the folder to load, or a hub id (`org/name`, not on disk). Raises ConfigError naming the path
    when it is local-looking but missing, or a folder without config.json."""
    p = Path(path).expanduser()
    if p.is_dir():
        if (p / "config.json").exists():
            return p
        raise ConfigError(
            f"model.path={path!r} is a folder but not a Hugging Face model folder (no config.json in it); "
            "give the folder that holds config.json and the weights (e.g. models/smollm2)"
        )
    parts = Path(path).parts
    hub_shaped = (
        len(parts) == 2
        and not path.startswith((".", "/", "~", "\\"))
        and parts[0] not in LOCAL_ROOTS
        and not Path(parts[0]).exists()
    )
    if p.exists():
        raise ConfigError(f"model.path={path!r} is a file; give the Hugging Face model folder (with config.json)")
    if not hub_shaped:
        parent = next((q for q in p.parents if q.is_dir()), Path("."))
        near = _model_folders(parent)
        hint = f"; model folders in {parent}/: {', '.join(near)}" if near else ""
        raise ConfigError(
            f"model.path={path!r}: folder not found (a local path; the hub is not asked){hint}. Give a Hugging Face "
            "model folder, or make one with: reinforce-ada models smollm2 --out models/smollm2"
        )
    return Path(path)  # a hub id: transformers loads it where this machine can reach the hub


def _model_folders(parent: Path, most: int = 5) -> list[str]:
    """Names of up to `most` Hugging Face model folders directly in `parent` (for the "folder not found" hint)."""
    try:
        return sorted(c.name for c in parent.iterdir() if (c / "config.json").is_file())[:most]
    except OSError:  # unreadable: no hint rather than a second error
        return []


PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
"""Weight files that are pickles: loading one can run code (torch's weights_only guard stops most, as a traceback)."""


def refuse_pickled_weights(folder: Path) -> None:
    """A local model folder must hold safetensors weights: one with only pickled weights is refused, naming them."""
    if any(folder.glob("*.safetensors")):
        return
    pickled = sorted(p.name for pattern in PICKLED for p in folder.glob(pattern))
    if pickled:
        raise ConfigError(
            f"{folder} holds its weights as pickles ({', '.join(pickled[:3])}), which reinforce-ada never loads "
            "(unpickling can run code); give a folder with model.safetensors (save_pretrained writes it)"
        )


def check_finite_weights(model: torch.nn.Module, folder: Path) -> None:
    """Refuse a model whose weights hold NaN or inf (a diverged run's save, a damaged file), naming a parameter:
    sampling from it fails deep inside torch."""
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise ConfigError(f"{folder}: the model's weights hold NaN or inf ({name}); evaluate an earlier checkpoint")


def load_policy(path: Path, model: ModelConfig) -> tuple[torch.nn.Module, Any]:
    """Model (fp32 master weights, LoRA-wrapped when `lora_r` > 0) and tokenizer from a folder (or a hub id)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own bar shows progress; theirs would interleave with it
    local = Path(path).is_dir()  # a folder here is never looked up on the hub
    if local:
        refuse_pickled_weights(Path(path))
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
        policy = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, local_files_only=local, use_safetensors=True if local else None
        )
    except OSError as e:
        where = "folder" if local else "hub id (no such folder here)"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"model.path={str(path)!r}: could not load this {where}: {first}") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.lora_r > 0:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise ConfigError("model.lora_r > 0 needs peft: pip install 'reinforce-ada[lora]'") from None
        lora = LoraConfig(r=model.lora_r, lora_alpha=model.lora_alpha, target_modules="all-linear", lora_dropout=0.0)
        with warnings.catch_warnings():  # peft 0.21 reads transformers' deprecated alias inside get_peft_model
            warnings.filterwarnings(
                "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
            )
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
