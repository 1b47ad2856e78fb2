"""The training config tree: one frozen dataclass per concern, every field `option(default, help)`.

`TrainConfig` nests the strategy (`sampling.config.StrategyConfig`: a name and that strategy's own options), the
model (`models.config`), the task (`tasks.config`), generation and rollout workers (`engines.config`), the optimiser,
replay and the run (here). TOML presets under `configs/` fill any subset of it (`[strategy]`, `[model]`, ...); CLI
flags override single fields. `[strategy]` is flat: `name` and the named strategy's options
(`sampling.configure.config_from_table`). Defaults are the embedded CPU testbed: a warm-started tiny Llama on built-in
arithmetic, trained with Ada-Seq-balance. One help convention for every section and strategy option:
`option(default, help)` (`sampling.options.option`: the help in the field's metadata), read by the CLI's `--help`,
the docs' reference pages and TRL's config (`field_docs`).
"""

from __future__ import annotations

import math
import sys
import tomllib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from reinforce_ada.engines.config import GenerationConfig, RolloutConfig, resolve_engine
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.config import ModelConfig
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import config_from_table, strategy_config
from reinforce_ada.sampling.options import coerce_value, option
from reinforce_ada.sampling.strategies import strategy_class, validate
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.training.bounds import check_memory_sized, check_step_draws
from reinforce_ada.training.replay_config import REPLAY_MOVED, ReplayConfig
from reinforce_ada.training.trackers import REPORT_TO_HELP

MAX_LR = 1.0
"""The largest `optim.lr` accepted: AdamW moves each weight by about lr per step, so above 1 every step overshoots."""
MAX_WEIGHT_DECAY = 1.0
"""The largest `optim.weight_decay` accepted (decoupled decay: each weight is scaled by 1 - lr x weight_decay)."""
OLD_LOGPROBS = ("auto", "sampler", "recompute")
WARMUP_SHARE = 0.2
"""The lr warm-up lasts at most this share of run.steps (`TrainConfig.warmup_steps`)."""
AGGREGATION_NAMES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
"""`losses.AGGREGATIONS`' names (a test keeps them equal): checking `optim.agg` must not import torch, so that a bad
flag is refused before any heavy import."""
IS_CORRECTIONS = ("auto", "none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass(frozen=True)
class OptimConfig:
    lr: float = option(2e-4, "AdamW peak learning rate.")
    warmup_steps: int = option(
        10,
        "Linear warm-up steps (the paper's 10), then constant; at most a fifth of run.steps (a short run reaches "
        "the peak lr: a 10-step warm-up in a 5-step run never did).",
    )
    weight_decay: float = option(0.0, "AdamW weight decay (the paper's 0).")
    grad_clip: float = option(1.0, "Gradient-norm clip.")
    clip_low: float = option(0.2, "PPO ratio clip below 1.")
    clip_high: float = option(0.28, "PPO ratio clip above 1 (asymmetric, as the paper).")
    dual_clip: float = option(10.0, "Dual-clip constant c for negative advantages (the official code's clip_ratio_c).")
    agg: str = option("token-mean", "Loss aggregation: token-mean, seq-mean-token-mean or seq-mean-token-sum.")
    entropy_coef: float = option(0.0, "Entropy bonus (the official script's 0; the paper's text says 1e-4).")
    kl_coef: float = option(0.0, "KL to the frozen initial policy (off, as the paper).")
    epochs: int = option(1, "Passes over each step's batch (1 = on-policy).")
    minibatches: int = option(1, "Optimizer steps per epoch.")
    micro_batch_size: int = option(256, "Sequences per forward/backward (gradient accumulation bounds memory).")
    old_logprobs: str = option(
        "auto",
        'The PPO "old" log-probs: sampler (the engine\'s, free), recompute (one no-grad learner forward before the '
        "update, as verl) or auto (recompute when sampler and learner compute different numbers: bf16 or vllm).",
    )
    is_correction: str = option(
        "auto",
        "Importance weight sampler -> learner on each token's loss (with recomputed old log-probs): none, "
        "token_truncate, token_mask, sequence_truncate, sequence_mask (as TRL's modes), or auto (token_truncate "
        "when recomputing, none otherwise).",
    )
    is_cap: float = option(
        2.0, "Cap C of the importance weight: truncate to min(w, C), or mask tokens/sequences with w > C."
    )
    max_update_ratio: float = option(
        1.0,
        "Roll back an optimizer step that moves the trainable weights by more than this times their norm (a sane "
        "AdamW step moves them by well under 1%; `training.guard`).",
    )
    max_rollbacks: int = option(
        3, "Stop the run after this many rolled-back optimizer steps in a row (lr or weight decay far too large)."
    )

    def __post_init__(self) -> None:
        if self.old_logprobs not in OLD_LOGPROBS:
            raise ConfigError(
                f"optim.old_logprobs={self.old_logprobs!r} is not valid; choose one of {list(OLD_LOGPROBS)}"
            )
        if self.is_correction not in IS_CORRECTIONS:
            raise ConfigError(
                f"optim.is_correction={self.is_correction!r} is not valid; choose one of {list(IS_CORRECTIONS)}"
            )
        if not 1.0 < self.is_cap < float("inf"):
            raise ConfigError(f"optim.is_cap={self.is_cap} must be > 1 (a finite cap on the importance weight)")
        if self.old_logprobs == "sampler" and self.is_correction not in ("none", "auto"):
            raise ConfigError(
                f"optim.is_correction={self.is_correction!r} needs optim.old_logprobs='recompute' (with the sampler's "
                "log-probs as the old policy, the PPO ratio already carries the sampler/learner mismatch)"
            )
        if not 0 < self.lr <= MAX_LR:
            raise ConfigError(
                f"optim.lr={self.lr} must be a finite number > 0 and <= {MAX_LR:g}; AdamW fine-tuning uses about "
                "1e-6..1e-3, and a larger step overshoots every weight"
            )
        if not 0 < self.max_update_ratio < float("inf"):
            raise ConfigError(f"optim.max_update_ratio={self.max_update_ratio} must be a finite number > 0")
        if self.max_rollbacks < 1:
            raise ConfigError(f"optim.max_rollbacks={self.max_rollbacks} must be >= 1")
        for name in ("epochs", "minibatches", "micro_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"optim.{name}={getattr(self, name)} must be >= 1")
        if self.warmup_steps < 0:
            raise ConfigError(f"optim.warmup_steps={self.warmup_steps} must be >= 0")
        for name in ("weight_decay", "grad_clip", "clip_low", "clip_high", "dual_clip", "entropy_coef", "kl_coef"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"optim.{name}={value!r} must be a finite number >= 0")
        if self.weight_decay > MAX_WEIGHT_DECAY:
            raise ConfigError(
                f"optim.weight_decay={self.weight_decay} must be <= {MAX_WEIGHT_DECAY:g} (usual values are 0..0.1; "
                "AdamW multiplies each weight by 1 - lr x weight_decay every step)"
            )
        if self.grad_clip <= 0:
            raise ConfigError(f"optim.grad_clip={self.grad_clip} must be > 0")
        if self.clip_low >= 1:
            raise ConfigError(f"optim.clip_low={self.clip_low} must be < 1 (the ratio is clipped from 1 - clip_low)")
        if self.dual_clip <= 1:
            raise ConfigError(f"optim.dual_clip={self.dual_clip} must be > 1")
        if self.agg not in AGGREGATION_NAMES:
            raise ConfigError(f"optim.agg={self.agg!r} is not valid; choose one of {sorted(AGGREGATION_NAMES)}")


@dataclass(frozen=True)
class RunConfig:
    steps: int = option(300, "RL steps.")
    batch_size: int = option(32, "Prompts per step.")
    seed: int = option(0, "Seed of everything random in the run (data order, sampling, downsampling).")
    run_dir: str = option(
        "runs/default", "Output folder: config, metrics.jsonl, TensorBoard events, checkpoints, report.png."
    )
    eval_every: int = option(
        50, "Evaluate on the held-out split every this many steps (and at the start and end); 0 = only start and end."
    )
    eval_samples: int = option(4, "Samples per held-out prompt (Ave@k at generation.temperature).")
    samples_per_step: int = option(
        4, "Completions saved per step to samples.jsonl in the run folder (prompt, completion, reward, cut or not)."
    )
    save_every: int = option(50, "Checkpoint every this many steps (and at the end).")
    keep_checkpoints: int = option(2, "Most recent checkpoints kept.")
    progress: bool = option(True, "Show a progress bar with live metrics.")
    max_verifier_error_share: float = option(
        0.5,
        "Stop the run (after saving a checkpoint) when the verifier fails on more than this share of a step's "
        "samples: a dead reward trains on nothing. 1.0 = never stop.",
    )
    report_to: str = option("tensorboard", REPORT_TO_HELP)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_samples", "save_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ConfigError(f"run.{name}={getattr(self, name)} must be >= 1")
        if self.samples_per_step < 0:
            raise ConfigError(f"run.samples_per_step={self.samples_per_step} must be >= 0 (0 saves none)")
        if self.eval_every < 0:
            raise ConfigError(f"run.eval_every={self.eval_every} must be >= 0")
        if self.seed < 0:
            raise ConfigError(f"run.seed={self.seed} must be >= 0")
        share = self.max_verifier_error_share
        if not (isinstance(share, int | float) and 0 <= share <= 1):
            raise ConfigError(f"run.max_verifier_error_share={share!r} must be a number in [0, 1] (1.0 = never stop)")
        if not str(self.run_dir).strip():
            raise ConfigError("run.run_dir is empty; give the folder the run writes to (default runs/default)")


@dataclass(frozen=True)
class TrainConfig:
    """A training run, whole: the strategy (`[strategy]`, its own options), `[model]`, `[task]`, `[generation]`
    (and `[rollout]`), `[optim]`, `[run]`, `[replay]`. Every field is checked when the config is built; the error
    names it and what is valid. Read one from TOML with `load_toml`, change fields with `apply_overrides` (what the
    CLI's `--section.field` flags do), write one with `to_toml` (a run folder's `config.toml`)."""

    strategy: StrategyConfig = field(default_factory=strategy_config)
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)

    @property
    def old_logprobs(self) -> str:
        """`optim.old_logprobs` resolved: auto recomputes when the sampler's numbers are not the learner's (bf16
        autocast in the learner, or vLLM's kernels)."""
        if self.optim.old_logprobs != "auto":
            return self.optim.old_logprobs
        return "recompute" if self.model.bf16 or self.engine == "vllm" else "sampler"

    @property
    def warmup_steps(self) -> int:
        """`optim.warmup_steps` capped at `WARMUP_SHARE` of `run.steps`: a departure from the paper's fixed 10 steps
        (made for 300+ step runs), so that a short run trains at the peak lr for most of its steps. A run keeps the
        warm-up it started with: extending a short run with `--resume --steps N` does not warm up again (the
        checkpoint records it)."""
        return min(self.optim.warmup_steps, int(self.run.steps * WARMUP_SHARE))

    @property
    def engine(self) -> str:
        """`generation.engine` resolved (`engines.config.resolve_engine`): hf or vllm."""
        return resolve_engine(self.generation.engine, self.model.device)

    @property
    def is_correction(self) -> str:
        """`optim.is_correction` resolved: auto is token_truncate when recomputing, none otherwise."""
        if self.optim.is_correction != "auto":
            return self.optim.is_correction
        return "token_truncate" if self.old_logprobs == "recompute" else "none"

    @property
    def streaming(self) -> bool:
        """`generation.streaming` resolved: None means the strategy's declared default (`traits.streams`)."""
        g = self.generation
        if g.streaming is not None:
            return g.streaming
        return strategy_class(self.strategy.name).traits.streams

    def __post_init__(self) -> None:
        s = self.strategy
        t = self.generation.temperature
        if not (isinstance(t, int | float) and 0 < t < float("inf")):
            raise ConfigError(
                f"generation.temperature={t} must be a finite number > 0 (at inf every token is equally likely: "
                "the run would train on uniform noise)"
            )
        cls = strategy_class(s.name)
        validate(cls, s)
        cls.check_training(s.options, self.run.batch_size)
        check_memory_sized(s.options, self.run.batch_size)  # what the options cost together (`training.bounds`)
        check_step_draws(cls, s.options, self.run.batch_size, self.generation.max_new_tokens)
        if self.task.name == "running_sums":  # the default 8 tokens cannot hold one answer: every reward would be 0
            from reinforce_ada.tasks import running_sums, running_sums_config

            rs = running_sums_config(self.task)
            need, room = max(map(running_sums.longest_answer, rs.levels)) + 1, running_sums.max_new_tokens(rs)
            if self.generation.max_new_tokens < need:
                raise ConfigError(
                    f"generation.max_new_tokens={self.generation.max_new_tokens} cannot hold task running_sums' "
                    f"answers (up to {need} tokens with <eos>); give --generation.max_new_tokens {room} (the task's "
                    "room for long wrong answers, tasks.running_sums.max_new_tokens)"
                )


SECTIONS = {f.name: f.default_factory for f in fields(TrainConfig)}  # type: ignore[misc]


def field_docs(cls: type) -> dict[str, str]:
    """Each field's help (`option(default, help)`): the CLI's help text and the docs' reference."""
    return {f.name: f.metadata.get("help", "") for f in fields(cls)}


def apply_overrides(cfg: TrainConfig, overrides: dict[str, dict[str, Any]], source: str) -> TrainConfig:
    """`{"section": {"field": value}}` -> a new validated config; unknown names are errors naming them."""
    sections = {}
    for sec, values in _moved(overrides, source).items():
        if sec not in SECTIONS:
            raise ConfigError(f"{source}: unknown section [{sec}]; valid sections are {sorted(SECTIONS)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{sec}] must be a table of key = value")
        current = getattr(cfg, sec)
        if sec == "strategy":
            sections[sec] = config_from_table(values, current, source)
            continue
        known = {f.name: f for f in fields(current)}
        changes = {}
        for key, value in values.items():
            if key not in known:
                raise ConfigError(f"{source}: unknown key {sec}.{key}; valid keys are {sorted(known)}")
            changes[key] = coerce_value(f"{sec}.{key}", value, str(known[key].type))
        sections[sec] = replace(current, **changes)
    return replace(cfg, **sections)


def _moved(overrides: dict[str, Any], source: str) -> dict[str, Any]:
    """0.3's `[strategy] replay*` keys read as `[replay]` (a note on stderr when one changes anything); one given in
    both spellings is an error naming both (`[replay]` used to win without a word)."""
    table = overrides.get("strategy")
    if not isinstance(table, dict) or not set(table) & set(REPLAY_MOVED):
        return overrides
    out = {**overrides, "strategy": dict(table), "replay": dict(overrides.get("replay") or {})}
    default = ReplayConfig()
    for old, new in REPLAY_MOVED.items():
        if old in out["strategy"]:
            value = out["strategy"].pop(old)
            if new in out["replay"]:
                raise ConfigError(
                    f"{source}: strategy.{old} (0.3's spelling) and replay.{new} are both given; they are one "
                    f"setting: keep replay.{new} and remove strategy.{old}"
                )
            out["replay"][new] = value
            if value != getattr(default, new):
                print(f"{source}: strategy.{old} is now replay.{new}; read as replay.{new}", file=sys.stderr)
    return out


def load_toml(path: str | Path, cfg: TrainConfig | None = None) -> TrainConfig:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {p} does not exist")
    if not p.is_file():
        raise ConfigError(f"config file {p} is not a file (a folder?); give a .toml file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"config file {p} cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bom = "UTF-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "not UTF-8"
        raise ConfigError(f"{p}: TOML files are UTF-8, this one is {bom} (byte {e.start}); save it as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    return apply_overrides(cfg or TrainConfig(), data, str(p))


def to_dict(cfg: Any) -> dict[str, Any]:
    if isinstance(cfg, StrategyConfig):  # flat: name, seed and the strategy's options, as `[strategy]` reads them
        return cfg.to_dict()
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


_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def _control(c: str) -> bool:
    return ord(c) < 0x20 or ord(c) == 0x7F


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):  # a TOML basic string: backslash, quote and every control character escaped
        return '"' + "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if _control(c) else c) for c in v) + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


__all__ = [
    "GenerationConfig",
    "ModelConfig",
    "OptimConfig",
    "ReplayConfig",
    "RolloutConfig",
    "RunConfig",
    "TaskConfig",
    "TrainConfig",
    "apply_overrides",
    "field_docs",
    "load_toml",
    "to_dict",
    "to_toml",
]
