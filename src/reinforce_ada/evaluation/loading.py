"""Load a model folder (full model or LoRA adapter) for evaluation, with the sampling and greedy engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError


def load_engines(
    folder: Path,
    *,
    engine: str = "hf",
    device: str = "cpu",
    threads: int = 2,
    greedy: bool = True,
    **gen: Any,
) -> tuple[Any, Any, Any]:
    """(tokenizer, sampling engine, greedy engine or None) for a model folder.

    `engine="hf"` loads the model (or LoRA adapter) on `device`; `engine="vllm"` hands the folder to vLLM (GPU) and
    shares one vLLM instance between the sampling and the greedy engine. `gen`: max_new_tokens, temperature, seed,
    batch_size (the local engine's decode batch or slots; vLLM schedules its own).
    """
    import copy

    import torch

    torch.set_num_threads(threads)
    if engine == "vllm":
        from transformers import AutoTokenizer

        from reinforce_ada.engines.vllm import VLLMEngine

        if (folder / "adapter_config.json").exists():
            raise ConfigError(f"{folder} is a LoRA adapter; the vllm engine needs a full model folder (merge it)")
        tok = AutoTokenizer.from_pretrained(folder)
        gen.pop("batch_size", None)
        eng = VLLMEngine(str(folder), tok, **gen)
        g = copy.copy(eng)
        g.params = {**eng.params, "temperature": 0.0}
        return tok, eng, g if greedy else None
    if engine != "hf":
        raise ConfigError(f"unknown engine {engine!r}; choose one of ['hf', 'vllm']")
    from reinforce_ada.engines import local_engine

    model, tok = load_model(folder, device=device)
    size = gen.pop("batch_size", 256)

    def make(**over: Any) -> Any:  # SlotEngine for Llama-family models, else HFEngine (the trainer's choice)
        return local_engine(model, tok, decode="auto", streaming=False, slots=size, batch_size=size, **{**gen, **over})

    return tok, make(), make(temperature=0.0, seed=0) if greedy else None


def load_model(folder: Path, *, device: str = "cpu") -> tuple[Any, Any]:
    """(model in eval mode on `device`, tokenizer) from a model folder or a LoRA adapter folder."""
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy

    if (folder / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model, tok = AutoPeftModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    else:
        model, tok = load_policy(folder, ModelConfig(path=str(folder)))
    return model.to(device).eval(), tok
