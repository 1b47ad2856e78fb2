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

    Any registered engine (`engines.factory.ENGINES`), built as the trainer builds it: "hf" loads the model (or LoRA
    adapter) on `device` (`SlotEngine` for Llama-family models, else `HFEngine`); an engine that loads its own copy
    (`capabilities.own_weights`: "vllm", GPU) gets the folder, and its greedy sibling shares that one instance.
    `gen`: max_new_tokens, temperature, seed, batch_size (the local engine's decode batch and slots; vLLM schedules
    its own).
    """
    import torch

    from reinforce_ada.engines import EngineSpec, build_engine, engine_class

    torch.set_num_threads(threads)
    size = gen.pop("batch_size", 256)
    spec = EngineSpec(**gen, slots=size, batch_size=size)
    if engine_class(engine).capabilities.own_weights:
        from transformers import AutoTokenizer

        if (folder / "adapter_config.json").exists():
            raise ConfigError(f"{folder} is a LoRA adapter; the {engine} engine needs a full model folder (merge it)")
        model, tok = None, AutoTokenizer.from_pretrained(folder)
    else:
        model, tok = load_model(folder, device=device)
    eng = build_engine(engine, spec, model=model, tokenizer=tok, model_path=str(folder))
    return tok, eng, eng.with_sampling(temperature=0.0, seed=0) if greedy else None


def load_model(folder: Path, *, device: str = "cpu") -> tuple[Any, Any]:
    """(model in eval mode on `device`, tokenizer) from a model folder or a LoRA adapter folder."""
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import check_finite_weights, load_policy

    if (folder / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model, tok = AutoPeftModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    else:
        model, tok = load_policy(folder, ModelConfig(path=str(folder)))
    check_finite_weights(model, folder)
    return model.to(device).eval(), tok
