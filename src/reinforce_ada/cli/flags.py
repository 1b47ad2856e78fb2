"""Command-line flags generated from the config dataclasses: every field gets a flag with its help text.

Strategy options are flags with dashes (`--samples-per-round`); training fields are `--section.field`
(`--optim.lr`), and the common run fields also have short forms (`--steps`, `--seed`, `--run-dir`,
`--rollout-workers`, `--rollout-address`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import fields
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig, coerce_value, strategy_names
from reinforce_ada.training.config import SECTIONS, TrainConfig, apply_overrides, field_docs, load_toml

PLAN_OPTIONS = tuple(f.name for f in fields(StrategyConfig) if f.name != "name" and f.metadata.get("plan", True))
"""The strategy options that change `plan`'s answer (closed forms or --monte-carlo); the others (marked `plan=False`
on the field: downsampling, baselines, weights, trackers across steps) shape what a step teaches, not how many
samples it draws."""


def add_strategy_flags(
    p: argparse.ArgumentParser, skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None
) -> None:
    """One flag per StrategyConfig field (`only`: just those, e.g. PLAN_OPTIONS for `plan`)."""
    title = "strategy options (same names as the config fields; each help says which strategies read it)"
    g = p.add_argument_group(title)
    g.add_argument(
        "--strategy",
        dest="name",
        default=None,
        choices=strategy_names(),
        metavar="NAME",
        help=f"one of {', '.join(strategy_names())} (default seq)",
    )
    for f in fields(StrategyConfig):
        if f.name == "name" or f.name in skip or (only is not None and f.name not in only):
            continue
        flag = "--" + f.name.replace("_", "-")
        g.add_argument(flag, dest=f.name, default=None, metavar=metavar(str(f.type)), help=help_text(f, f.default))


def strategy_from_args(args: argparse.Namespace, base: StrategyConfig | None = None) -> StrategyConfig:
    base = base or StrategyConfig()
    changes: dict[str, Any] = {}
    for f in fields(StrategyConfig):
        raw = getattr(args, f.name, None)
        if raw is not None:
            changes[f.name] = coerce_value(f.name, str(raw), str(f.type)) if f.name != "name" else raw
    return base.replace(**changes)


RUN_FLAGS = ("steps", "batch_size", "seed", "run_dir", "eval_every", "eval_samples", "save_every")
"""Run fields that also get a short flag (`--steps`); every field has its dotted form (`--run.steps`)."""


def verifier_names() -> str:
    from reinforce_ada.tasks.verifiers import VERIFIERS

    return ", ".join(VERIFIERS)


def table_help() -> dict[str, str]:
    """Help texts generated from the registries (task table, verifiers), so they never go stale."""
    from reinforce_ada.engines.config import engine_help
    from reinforce_ada.tasks.registry import help_lines

    return {
        **engine_help(field_docs),
        "task.name": f"one of: {help_lines(trainable=True)} (default arithmetic)",
        "task.verifier": f"{verifier_names()}, or a function of yours as module:function or path/to/file.py:function "
        "(default: the task's own, listed under --task.name)",
    }


def add_train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", help="TOML preset (sections [strategy], [model], [task], [generation], [optim], [run], [rollout])"
    )
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    add_strategy_flags(p, skip=("seed",))  # the run's --seed seeds the strategy too
    for sec, factory in SECTIONS.items():
        if sec == "strategy":
            continue
        g = p.add_argument_group(f"[{sec}]")
        cls = factory()
        docs = field_docs(type(cls))
        generated = table_help()
        for f in fields(cls):
            flags = [f"--{sec}.{f.name}"]
            if sec == "run" and f.name in RUN_FLAGS:
                flags.insert(0, "--" + f.name.replace("_", "-"))
            if sec == "rollout" and f.name in ("workers", "address"):
                flags.insert(0, f"--rollout-{f.name}")
            g.add_argument(
                *flags,
                dest=f"{sec}.{f.name}",
                default=None,
                metavar=metavar(str(f.type)),
                help=generated.get(f"{sec}.{f.name}") or help_text(f, getattr(cls, f.name), docs.get(f.name, "")),
            )


def train_config_from_args(args: argparse.Namespace) -> Any:
    cfg = TrainConfig()
    if args.resume:
        saved = Path(args.resume) / "config.toml"
        if not saved.exists():
            raise ConfigError(f"--resume {args.resume}: no config.toml there (is it a run folder?)")
        cfg = load_toml(saved)
    if args.config:
        cfg = load_toml(args.config, cfg)
    overrides: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if "." in key and value is not None:
            sec, name = key.split(".", 1)
            overrides.setdefault(sec, {})[name] = value
    cfg = apply_overrides(cfg, overrides, "command line")
    strategy = strategy_from_args(args, cfg.strategy)
    cfg = dataclasses.replace(cfg, strategy=strategy)
    if args.resume:  # the folder given is the run, wherever it was made or moved to
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, run_dir=str(args.resume)))
    return cfg


def metavar(type_name: str) -> str:
    """`int | None` -> INT, `tuple[float, ...]` -> FLOAT,FLOAT,... (the comma-separated form the parser reads)."""
    base = type_name.split(" | ")[0].strip()
    if base.startswith("tuple[") or base.startswith("list["):
        inner = base[base.index("[") + 1 :].split(",")[0].strip(" ]")
        return f"{inner.upper()},{inner.upper()},..."
    return base.upper()


def help_text(f: dataclasses.Field, default: Any, doc: str | None = None) -> str:
    """The field's help plus its default, unless the help already states the default (`k_pos`)."""
    text = f.metadata.get("help", "") if doc is None else doc
    if "default" not in text:
        shown = ",".join(str(x) for x in default) if isinstance(default, tuple) else default
        text = f"{text} (default {shown})"
    return _escape(text)


def _escape(text: str) -> str:
    """argparse formats help with %: a literal percent sign must be doubled."""
    return text.replace("%", "%%")
