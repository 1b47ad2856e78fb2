"""Command-line flags generated from the config dataclasses: every field gets a flag with its help text.

Strategy options are flags with dashes (`--samples-per-round`), generated from the chosen strategy's options class
(`--strategy NAME`; its own options and the shared ones whose default it changes first, then the shared groups;
`strategy_options` is the one place they are read), so `--help` lists that strategy's options and a strategy
registered from outside the package brings its own flags. `train --help` lists the strategy's own group, the common
one and the most-used sections (`BRIEF_SECTIONS`); the shared groups and the other sections are behind
`--help-all`. A feature's options (`--select iw` brings `--iw-mix`, ...) are listed when the command line turns the
feature on (`Chosen.switches`). Every other registered strategy's and feature's options are accepted too (hidden),
so that `--strategy uniform --k-pos 2` is refused naming the strategies that have `k_pos`, and `--iw-mix 0.3`
without `--select iw` names the feature. Training fields are `--section.field` (`--optim.lr`),
and the common run fields also have short forms (`--steps`, `--seed`, `--run-dir`, `--rollout-workers`,
`--rollout-address`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from reinforce_ada.cli.help import Parser
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import strategy_config, switch, user_set
from reinforce_ada.sampling.options import (
    FEATURES,
    GROUPS,
    Options,
    OptionSpec,
    coerce_value,
    option_specs,
    options_class,
    type_name,
)
from reinforce_ada.sampling.strategies import AUTO, STRATEGIES, strategy_class, strategy_names, vocabulary
from reinforce_ada.training.config import REPLAY_MOVED, SECTIONS, TrainConfig, apply_overrides, field_docs, load_toml

DEFAULT_STRATEGY = "seq"
GROUP_TITLES = {"common": "what counts as correct, group size", **{g: g for g in GROUPS}}
SHARED_DEFAULTS = {f.name: f.default for f in fields(Options)}
"""The shared options' defaults: one a strategy changes is listed in that strategy's own `--help` group."""


@dataclass(frozen=True)
class Chosen:
    """What a command line chose before it is parsed: the strategy (`--strategy X`, else the default) and the feature
    switches it names (`--select iw`, `--forgetting drift`, `--estimator both`): which options `--help` lists."""

    name: str = DEFAULT_STRATEGY
    switches: tuple[tuple[str, str], ...] = ()


def _value_of(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def strategy_in(argv: list[str] | None) -> Chosen:
    """The strategy and feature switches named on a command line (`Chosen`)."""
    argv = argv or []
    name = _value_of(argv, "--strategy")
    name = AUTO if name == "auto" else name
    switches = tuple((k, v) for k in FEATURES if (v := _value_of(argv, "--" + k)) is not None)
    return Chosen(name if name in STRATEGIES else DEFAULT_STRATEGY, switches)


def strategy_options(chosen: Chosen | str) -> list[OptionSpec]:
    """Every option of the chosen strategy and of the features it turns on, as its flags, `--help` and `plan` read
    them: the one place the command line reads a strategy's options (`sampling.options.option_specs`)."""
    chosen = Chosen(chosen) if isinstance(chosen, str) else chosen
    return option_specs(options_class(strategy_class(chosen.name).Options, dict(chosen.switches)))


def help_group(name: str, spec: OptionSpec) -> str:
    """The `--help` group of an option of strategy `name`: the strategy's own group for its own options and for the
    shared ones whose default it changes (SPO's `n = 1`), else the shared group's."""
    if spec.group == "own" or spec.default != SHARED_DEFAULTS.get(spec.name, spec.default):
        return f"{name} options"
    return GROUP_TITLES.get(spec.group, f"{spec.group} options")  # a feature's: "select=iw options"


def _names(label: str, switch: str, value: str) -> bool:
    """A feature group's label (`estimator=predictor|both`) holds `switch=value`."""
    return any(k == switch and value in v.split("|") for k, _, v in (p.partition("=") for p in label.split("; ")))


def add_strategy_flags(p: Parser, chosen: Chosen = Chosen(), plan_only: bool = False, brief: bool = False) -> None:
    """`--strategy` and one flag per option of the chosen strategy and features (`plan_only`: just those that change
    `plan`'s answer); the other options are accepted but hidden (module docstring). `brief`: `--help` lists the
    strategy's own group, the common one and the chosen features', and leaves the shared groups to `--help-all`."""
    name = chosen.name
    g = p.add_argument_group("strategy")
    g.add_argument(
        "--strategy",
        dest="name",
        default=None,
        choices=strategy_names(),
        metavar="NAME",
        help=f"one of {', '.join(strategy_names())} (default {DEFAULT_STRATEGY}, the paper's best setting: about 2x "
        "faster per RL step than GRPO-n4; when generated tokens are the bill use auto, plain GRPO: no adaptive "
        "strategy beat it per token, docs/which-sampler.md); `--strategy NAME --help` lists that strategy's options",
    )
    own = f"{name} options"  # first, then the common group, whatever order the specs come in (SPO has no own field)
    groups = {own: p.add_argument_group(own), GROUP_TITLES["common"]: p.add_argument_group(GROUP_TITLES["common"])}
    shown = set()
    for spec in strategy_options(chosen):
        if plan_only and not spec.plan:
            continue
        title = help_group(name, spec)
        if title not in groups:
            named = any(_names(spec.group, k, v) for k, v in chosen.switches)  # `--select iw` given
            feature = spec.group not in ("own", "common", *GROUPS)
            more = brief and (spec.group in GROUPS or (feature and not named))  # a named feature's stay in --help
            groups[title] = p.more_group(title) if more else p.add_argument_group(title)
        said = spec.default is None and "default" in spec.help  # a None default the help explains ("default: n//2")
        help = _escape(spec.help if said else f"{spec.help} (default {spec.default})")  # this strategy's own
        groups[title].add_argument(
            "--" + spec.name.replace("_", "-"), dest=spec.name, default=None, metavar=metavar(spec.type), help=help
        )
        shown.add(spec.name)
    for other in sorted(set(vocabulary()) - shown):
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
        **engine_help(),
        "task.name": f"one of: {help_lines(trainable=True)} (default arithmetic)",
        "task.verifier": f"{verifier_names()}, or a function of yours as module:function or path/to/file.py:function "
        "(default: the task's own, listed under --task.name)",
    }


BRIEF_SECTIONS = ("model", "task", "run")
"""The training sections `train --help` lists; the others (`[generation]`, `[optim]`, `[rollout]`, `[replay]`) are
behind `--help-all`."""


def add_train_flags(p: Parser, chosen: Chosen = Chosen()) -> None:
    """`--config`, `--resume`, the strategy's flags and one `--section.field` flag per field of every other section
    (the common run fields also short: `--steps`)."""
    p.add_argument("--config", help=f"TOML preset (sections {', '.join(f'[{s}]' for s in SECTIONS)})")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    add_strategy_flags(p, chosen, brief=True)
    for old in REPLAY_MOVED:  # 0.3's flags: refused naming the new one (train_config_from_args)
        p.add_argument("--" + old.replace("_", "-"), dest=f"moved.{old}", default=None, help=argparse.SUPPRESS)
    generated = table_help()
    for sec, factory in SECTIONS.items():
        if sec == "strategy":
            continue
        g = p.add_argument_group(f"[{sec}]") if sec in BRIEF_SECTIONS else p.more_group(f"[{sec}]")
        cls = factory()
        docs = field_docs(type(cls))
        for f in fields(cls):
            g.add_argument(
                *section_flags(sec, f.name),
                dest=f"{sec}.{f.name}",
                default=None,
                metavar=metavar(type_name(f.type)),
                help=generated.get(f"{sec}.{f.name}") or help_text(f, getattr(cls, f.name), docs.get(f.name, "")),
            )


def section_flags(sec: str, name: str) -> list[str]:
    """`--section.field`, after its short form where it has one (`--steps`, `--rollout-workers`)."""
    flags = [f"--{sec}.{name}"]
    if sec == "run" and name in RUN_FLAGS:
        flags.insert(0, "--" + name.replace("_", "-"))
    if sec == "rollout" and name in ("workers", "address"):
        flags.insert(0, f"--rollout-{name}")
    return flags


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
