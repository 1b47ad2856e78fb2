"""`[model]`: which policy to train and how (path, LoRA, precision, threads, device). Each field is
`option(default, help)`, as every config section and strategy option (`sampling.options.option`)."""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import option


@dataclass(frozen=True)
class ModelConfig:
    path: str | None = option(
        None,
        "Local Hugging Face model folder; None: the embedded tiny char-level Llama, warm-started on arithmetic "
        "(shipped, else built and cached): it trains on task arithmetic and on a file of prompts it can read "
        "(<bos>18+73=); running_sums: its own.",
    )
    hidden_size: int = option(64, "Embedded model: width (ignored with `path`).")
    num_layers: int = option(2, "Embedded model: decoder layers.")
    num_heads: int = option(2, "Embedded model: attention heads.")
    sft_steps: int = option(
        2000, "Embedded model: supervised warm-start steps (cached by config hash; running_sums: its own)."
    )
    lora_r: int = option(0, "LoRA rank through `peft` (0 = full fine-tune).")
    lora_alpha: int = option(32, "LoRA scaling alpha.")
    bf16: bool = option(False, "bf16 autocast for forward passes (fp32 master weights stay).")
    threads: int = option(2, "torch CPU threads.")
    device: str = option("auto", "Where the policy trains: cpu, cuda, cuda:N, or auto (cuda when available).")

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "sft_steps", "threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")
        if self.lora_r < 0:
            raise ConfigError(f"model.lora_r={self.lora_r} must be >= 0 (0 disables LoRA)")
        if self.lora_alpha <= 0:  # LoRA scales its update by alpha / r: a negative alpha flips its sign, 0 erases it
            raise ConfigError(f"model.lora_alpha={self.lora_alpha} must be > 0 (LoRA scales the adapter by alpha / r)")
