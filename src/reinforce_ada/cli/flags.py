"""Command-line flags generated from the config dataclasses: every field gets a flag with its help text.

Strategy options are flags with dashes (`--samples-per-round`), generated from the chosen strategy's options class
(`--strategy NAME`; its own options first, then the shared groups), so `--help` lists that strategy's options and a
strategy registered from outside the package brings its own flags; a feature's options (`--select iw` brings
`--iw-mix`, ...) are listed when the command line turns the feature on. Every other registered strategy's and
feature's options are accepted too (hidden), so that `--strategy uniform --k-pos 2` is refused naming the strategies
that have `k_pos`, and `--iw-mix 0.3` without `--select iw` names the feature.
Training fields are `--section.field` (`--optim.lr`), and the common run fields also have short forms (`--steps`,
`--seed`, `--run-dir`, `--rollout-workers`, `--rollout-address`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import fields
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import strategy_config, switch, user_set
from reinforce_ada.sampling.options import FEATURES, GROUPS, coerce_value, option_specs, options_class, type_name
from reinforce_ada.sampling.strategies import AUTO, STRATEGIES, strategy_class, strategy_names, vocabulary
from reinforce_ada.training.config import REPLAY_MOVED, SECTIONS, TrainConfig, apply_overrides, field_docs, load_toml

DEFAULT_STRATEGY = "seq"
GROUP_TITLES = {"common": "what counts as correct, group size", **{g: g for g in GROUPS}}


def strategy_in(argv: list[str] | None) -> str:
    """The strategy named on a command line (`--strategy X` or `--strategy=X`), else the default: which options
    `--help` lists."""
    argv = argv or []
    for i, a in enumerate(argv):
        if a == "--strategy" and i + 1 < len(argv):
            name = argv[i + 1]
        elif a.startswith("--strategy="):
            name = a.split("=", 1)[1]
        else:
            continue
        name = AUTO if name == "auto" else name
        return name if name in STRATEGIES else DEFAULT_STRATEGY
    return DEFAULT_STRATEGY


def switches_in(argv: list[str] | None) -> dict[str, str]:
    """The feature switches named on a command line (`--select iw`, `--forgetting=drift`): which feature options
    `--help` lists."""
    argv, out = argv or [], {}
    for i, a in enumerate(argv):
        for key in FEATURES:
            flag = "--" + key
            if a == flag and i + 1 < len(argv):
                out[key] = argv[i + 1]
            elif a.startswith(flag + "="):
                out[key] = a.split("=", 1)[1]
    return out


def add_strategy_flags(
    p: argparse.ArgumentParser,
    name: str = DEFAULT_STRATEGY,
    skip: tuple[str, ...] = (),
    plan_only: bool = False,
    switches: dict[str, str] | None = None,
) -> None:
    """`--strategy` and one flag per option of strategy `name` and of the features `switches` turn on (`plan_only`:
    just those that change `plan`'s answer); the other options are accepted but hidden (module docstring)."""
    g = p.add_argument_group("strategy")
    g.add_argument(
        "--strategy",
        dest="name",
        default=None,
        choices=strategy_names(),
        metavar="NAME",
        help=f"one of {', '.join(strategy_names())} (default {DEFAULT_STRATEGY}, the paper's best setting: about 2x "
        "faster per RL step; when generated tokens are the bill use auto, plain GRPO: no adaptive strategy beat it "
        "per token, docs/which-sampler.md); `--strategy NAME --help` lists that strategy's options",
    )
    groups: dict[str, argparse._ArgumentGroup] = {}
    shown = set()
    for spec in option_specs(options_class(strategy_class(name).Options, switches)):
        if spec.name in skip or (plan_only and not spec.plan):
            continue
        title = f"{name} options" if spec.group == "own" else GROUP_TITLES.get(spec.group, f"{spec.group} options")
        grp = groups.setdefault(title, p.add_argument_group(title))
        flag = "--" + spec.name.replace("_", "-")
        said = spec.default is None and "default" in spec.help  # a None default the help explains ("default: n//2")
        help = _escape(spec.help if said else f"{spec.help} (default {spec.default})")  # this strategy's own
        grp.add_argument(flag, dest=spec.name, default=None, metavar=metavar(spec.type), help=help)
        shown.add(spec.name)
    for other in sorted(set(vocabulary()) - shown - set(skip)):
        p.add_argument("--" + other.replace("_", "-"), dest=other, default=None, help=argparse.SUPPRESS)


def strategy_from_args(args: argparse.Namespace, base: StrategyConfig | None = None) -> StrategyConfig:
    """The strategy the flags describe, on `base` (a preset's or a resumed run's; default: the default strategy)."""
    values = {k: getattr(args, k) for k in vocabulary() if getattr(args, k, None) is not None}
    name = getattr(args, "name", None)
    if base is None:
        base = strategy_config(name or DEFAULT_STRATEGY)
    declared = strategy_class(AUTO if name == "auto" else name or base.name).Options
    target = options_class(declared, {**user_set(base), **values}).__dataclass_fields__
    changes = {k: coerce_value(k, str(v), type_name(target[k].type)) if k in target else v for k, v in values.items()}
    if name is not None and (AUTO if name == "auto" else name) != base.name:
        return switch(base, name, **changes)
    return strategy_config(base.name, seed=base.seed, **{**user_set(base), **changes})


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


def add_train_flags(
    p: argparse.ArgumentParser, name: str = DEFAULT_STRATEGY, switches: dict[str, str] | None = None
) -> None:
    p.add_argument("--config", help=f"TOML preset (sections {', '.join(f'[{s}]' for s in SECTIONS)})")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    add_strategy_flags(p, name, switches=switches)
    for old in REPLAY_MOVED:  # 0.3's flags: refused naming the new one (train_config_from_args)
        p.add_argument("--" + old.replace("_", "-"), dest=f"moved.{old}", default=None, help=argparse.SUPPRESS)
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
                metavar=metavar(type_name(f.type)),
                help=generated.get(f"{sec}.{f.name}") or help_text(f, getattr(cls, f.name), docs.get(f.name, "")),
            )


def train_config_from_args(args: argparse.Namespace) -> Any:
    for old, new in REPLAY_MOVED.items():
        if getattr(args, f"moved.{old}", None) is not None:
            flag = "--" + old.replace("_", "-")
            raise ConfigError(f"{flag} is now --replay.{new} (replay is a training setting: [replay] {new} = ...)")
    cfg = TrainConfig()
    run_dir = getattr(args, "run.run_dir", None)
    if args.resume and run_dir is not None and Path(run_dir).absolute() != Path(args.resume).absolute():
        raise ConfigError(
            f"--resume {args.resume} continues the run in that folder, so --run-dir {run_dir} would be ignored; give "
            "one of them (to continue elsewhere, move or copy the run folder there and --resume it)"
        )
    if args.resume:
        saved = Path(args.resume) / "config.toml"
        if not saved.exists():
            raise ConfigError(f"--resume {args.resume}: no config.toml there (is it a run folder?)")
        cfg = load_toml(saved)
    if args.config:
        cfg = load_toml(args.config, cfg)
    overrides: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if "." in key and value is not None and not key.startswith("moved."):
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
