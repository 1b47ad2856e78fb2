"""Sampling strategies in one registry, all built as `cls(cfg)`; each implements `sampling.protocol` once.

The registry is the only list of names. Everything else about a strategy -- its options and their defaults (its
`Options` class: baseline included), streaming default, planner, its own validation -- is declared on its class and
asked of the class through `strategy_class(name)`. Adding a strategy: one file (a `PoolStrategy` subclass with
`traits` and `Options`) and one line, here or from outside the package with `register_strategy("foo", Foo)` (or a
`reinforce_ada.strategies` entry point, or `--plugin FILE.py` on the command line).

`auto` names the strategy we recommend (`AUTO`, with the measurements behind it); a config resolves it at once.

`greso` and `mopps` are prompt-admission rules over a base sampler (`sampling.admission`): the names build DAPO
dynamic sampling + GRESO (as the GRESO paper) and GRPO + MoPPS (as the MoPPS paper); `select=greso|mopps|value|iw`
puts such a rule in front of any other strategy, and `evict` (on by default for pilot_commit) adds eviction.
"""

from __future__ import annotations

import re
from dataclasses import fields

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission import admission_rule, needs_admission, with_admission
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.law import ONE_SAMPLE_SILENT
from reinforce_ada.sampling.options import FEATURES, type_name
from reinforce_ada.sampling.protocol import PoolStrategy, Strategy, downsample
from reinforce_ada.sampling.strategies.conformal import Conformal
from reinforce_ada.sampling.strategies.dynamic import Dynamic
from reinforce_ada.sampling.strategies.est import Est, allocate, allocate_counts, allocation_weights, knapsack_allocate
from reinforce_ada.sampling.strategies.greso import GresoDynamic
from reinforce_ada.sampling.strategies.knapsack import Knapsack, knapsack_budget
from reinforce_ada.sampling.strategies.mopps import MoppsUniform
from reinforce_ada.sampling.strategies.pilot_commit import PilotCommit
from reinforce_ada.sampling.strategies.seq import Seq
from reinforce_ada.sampling.strategies.spo import Spo
from reinforce_ada.sampling.strategies.uniform import Uniform
from reinforce_ada.sampling.traits import Traits

STRATEGIES: dict[str, type[PoolStrategy]] = {
    "uniform": Uniform,
    "dynamic": Dynamic,
    "seq": Seq,
    "est": Est,
    "pilot_commit": PilotCommit,
    "knapsack": Knapsack,
    "greso": GresoDynamic,
    "mopps": MoppsUniform,
    "conformal": Conformal,
    "spo": Spo,
}
"""Name -> the sampler class; `build_strategy` adds the admission stage where the config asks for one."""

AUTO = "uniform"
"""What `name = "auto"` builds: the arm we recommend when generated tokens are the bill, plain GRPO (`uniform`, n = 4
by default) at a tuned learning rate. On the registered pools of the compute-to-target study no adaptive arm reached
an accuracy with fewer tokens than the best uniform GRPO (the measured factors: docs/which-sampler.md, generated from
the study's results). Until an allocator beats it under a pre-registration, the honest recommendation is the baseline.
`strategy_config("auto")` resolves to this name at construction, so a run's config.toml, metrics and checkpoints
name what ran, and resuming it never switches algorithm when the recommendation changes."""
STRATEGIES["auto"] = STRATEGIES[AUTO]  # a CLI choice and a registry entry; configs resolve it (above)

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_strategy(name: str, cls: type[PoolStrategy], *, replace: bool = False) -> type[PoolStrategy]:
    """Make `cls` known as `name` everywhere (config, CLI, trainer, TRL, planner, simulate, compare).

    The class must be a `PoolStrategy` subclass with `traits` and `Options`; an option that another registered
    strategy also has must keep that option's type (one vocabulary); registering a taken name is an error unless
    `replace=True`. Returns `cls`, so it also works as `register_strategy("foo", Foo)` right after the class.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"strategy name {name!r} must be lower-case letters, digits and '_', starting with a letter")
    if not (isinstance(cls, type) and issubclass(cls, PoolStrategy)):
        raise ConfigError(f"strategy {name!r}: {cls!r} is not a subclass of reinforce_ada.sampling.PoolStrategy")
    if not isinstance(getattr(cls, "traits", None), Traits):
        raise ConfigError(f"strategy {name!r}: {cls.__name__} declares no traits (reinforce_ada.sampling.traits)")
    if name in STRATEGIES and STRATEGIES[name] is not cls and not replace:
        raise ConfigError(f"strategy name {name!r} is taken by {STRATEGIES[name].__name__}; pass replace=True")
    theirs = {**feature_types(), **option_types(c for n, c in STRATEGIES.items() if n != name)}
    for f in fields(cls.Options):
        if f.name in theirs and theirs[f.name] != type_name(f.type):
            raise ConfigError(
                f"strategy {name!r}: option {f.name!r} is declared {f.type}, but other strategies declare it "
                f"{theirs[f.name]} (one name, one type: rename the option)"
            )
    STRATEGIES[name] = cls
    return cls


def option_types(classes) -> dict[str, str]:
    """Option name -> its declared type over the given strategy classes (the union of their vocabularies)."""
    return {f.name: type_name(f.type) for cls in classes for f in fields(cls.Options)}


def feature_types() -> dict[str, str]:
    """Option name -> its declared type over every feature's options (`sampling.options.FEATURES`)."""
    return {f.name: type_name(f.type) for t in FEATURES.values() for c in t.values() for f in fields(c)}


def vocabulary() -> dict[str, str]:
    """Every option name a strategy config can hold -> its type: the strategies' and the features' (the CLI parses
    them all and `strategy_config` says which apply)."""
    return {**feature_types(), **option_types(STRATEGIES.values())}


def strategy_class(name: str) -> type[PoolStrategy]:
    """The class registered as `name`; the error lists the registered names."""
    try:
        return STRATEGIES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown strategy {name!r}; choose one of {list(STRATEGIES)}") from None


def strategy_names() -> tuple[str, ...]:
    return tuple(STRATEGIES)


def load_strategy_plugins() -> list[str]:
    """Register the strategies other packages declare as `reinforce_ada.strategies` entry points (name = class).

    Returns the names loaded. A plugin that fails to import is an error naming it (never skipped silently).
    """
    from importlib.metadata import entry_points

    loaded = []
    for ep in entry_points(group="reinforce_ada.strategies"):
        try:
            cls = ep.load()
        except SystemExit as e:  # sys.exit at import: the command would end, status 0, having done nothing
            raise ConfigError(
                f"strategy plugin {ep.name!r} ({ep.value}) called sys.exit({e.code!r}) while being imported; a "
                "plugin must not exit"
            ) from None
        except Exception as e:  # noqa: BLE001 - any import failure of a plugin is reported with its name
            raise ConfigError(f"strategy plugin {ep.name!r} ({ep.value}) failed to import: {e}") from e
        register_strategy(ep.name, cls, replace=STRATEGIES.get(ep.name) is cls)
        loaded.append(ep.name)
    return loaded


def build_strategy(cfg: StrategyConfig, **kwargs) -> PoolStrategy:
    """Build the strategy named by `cfg.name` (`sampling.configure.strategy_config` makes a config from flat names).
    `predictor=` (prompt -> p_hat) is passed through to strategies whose traits say `takes_predictor` (est,
    knapsack)."""
    cls = strategy_class(cfg.name)
    validate(cls, cfg)
    if kwargs and not cls.traits.takes_predictor:
        takers = [n for n, c in STRATEGIES.items() if c.traits.takes_predictor]
        raise ConfigError(f"strategy {cfg.name!r} takes no {sorted(kwargs)} (only {', '.join(takers)} take predictor=)")
    if needs_admission(cfg.options):
        cls = with_admission(cls)
    return cls(cfg, **kwargs)


def validate(cls: type[PoolStrategy], cfg: StrategyConfig) -> None:
    """The checks that need the registries: the options are the class's, `select` names an admission rule and does
    not contradict one built into the name (greso, mopps), the baseline can score a group of n, then the class's own
    `validate`."""
    opts = cfg.options
    if not isinstance(opts, cls.Options):
        raise ConfigError(
            f"strategy {cfg.name!r} takes {cls.Options.__name__} options, not {type(opts).__name__} (build the config "
            "with sampling.configure.strategy_config)"
        )
    admission_rule(opts.select)
    built_in = cls.Options.__dataclass_fields__["select"].default
    if cls.select_fixed and opts.select != built_in:
        raise ConfigError(
            f"select={opts.select!r} contradicts name={cfg.name!r} (which is select={built_in!r} built in)"
        )
    if opts.n < 2 and opts.advantage in ONE_SAMPLE_SILENT.get(cls.traits.planner, ()):  # the kept group is n
        raise ConfigError(
            f"advantage={opts.advantage!r} with n={opts.n}: each prompt's baseline would be its own single sample, so "
            "every advantage is 0 and the run learns nothing; use n >= 2, or advantage='tracker' (SPO's per-prompt "
            "value from earlier visits, defined for one sample)"
        )
    cls.validate(opts)


__all__ = [
    "AUTO",
    "STRATEGIES",
    "Conformal",
    "GresoDynamic",
    "MoppsUniform",
    "Traits",
    "Dynamic",
    "Est",
    "Knapsack",
    "PilotCommit",
    "PoolStrategy",
    "Seq",
    "Spo",
    "Strategy",
    "Uniform",
    "allocate",
    "allocate_counts",
    "allocation_weights",
    "build_strategy",
    "downsample",
    "knapsack_allocate",
    "knapsack_budget",
    "load_strategy_plugins",
    "register_strategy",
    "strategy_class",
    "strategy_names",
    "vocabulary",
    "with_admission",
]
