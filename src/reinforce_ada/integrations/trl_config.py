"""`AdaGRPOConfig`: TRL's `GRPOConfig` plus our strategy options, under the names they have everywhere else.

1) The strategy fields are generated from the registered strategies' options classes (`sampling.options`; one
   vocabulary, one help text each), the union over every strategy registered when this module is imported: every
   option but `n` (here TRL's `num_generations`, the group size trained on); the strategy's name is `strategy` and its
   seed TRL's `seed` (each process's strategy draws from `seed + process index`). An option whose default differs
   between strategies (the baseline, `select`, `evict`) defaults to None here: the chosen strategy's own. A strategy
   registered later brings its options through an arm spec: `strategy="mine:my_option=3"`.
2) `__post_init__` checks each strategy field's type against its annotation (`k_pos="2"`, `max_samples=2.5` fail
   naming the field; the command line converts for you), then builds the `StrategyConfig`, so a bad value fails at
   config time with the options class's message, the field named as the user wrote it (`strategy=`,
   `num_generations=`); a field set away from its default that the chosen strategy does not have is an error naming
   it. `reward_weights` must be finite real numbers, `max_verifier_error_share` in [0, 1].
3) Options of TRL's that would silently change what our strategy decides are rejected or mapped here:
   `scale_rewards="none"` means `scale_std=False` unless `scale_std` is set; `scale_rewards="batch"` and
   `multi_objective_aggregation="normalize_then_sum"` are refused (the strategy's baseline is the advantage).
"""

from __future__ import annotations

import math
import numbers
import re
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from trl import GRPOConfig

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm, strategy_config, user_set
from reinforce_ada.sampling.options import FEATURES, feature_label, options_class, type_name
from reinforce_ada.sampling.strategies import STRATEGIES

RENAMED = {"name": "strategy", "n": "num_generations"}
"""Our option name -> the AdaGRPOConfig field that holds it."""


@dataclass(frozen=True)
class Option:
    """One strategy option as an AdaGRPOConfig field: its type, its default (None: the strategy's own) and help."""

    type: str
    default: Any
    help: str


def strategy_options() -> dict[str, Option]:
    """The union of the registered strategies' options (module docstring, 1)."""
    seen: dict[str, dict[str, Any]] = {}
    for strategy, cls in STRATEGIES.items():
        for f in fields(cls.Options):
            if f.name != "n" and strategy != "auto":
                seen.setdefault(f.name, {})[strategy] = f
    for feature in dict.fromkeys(c for table in FEATURES.values() for c in table.values()):  # select=iw: iw_mix
        for f in fields(feature):
            seen.setdefault(f.name, {}).setdefault(feature_label(feature), f)
    out = {}
    for name, by in seen.items():
        f = next(iter(by.values()))
        agree = all(g.default == f.default for g in by.values())
        typ = type_name(f.type) if agree or "None" in type_name(f.type) else f"{type_name(f.type)} | None"
        helps: dict[str, list[str]] = {}
        for strategy, g in by.items():
            helps.setdefault(g.metadata.get("help", ""), []).append(strategy)
        text = next(iter(helps)) if len(helps) == 1 else "; ".join(f"{', '.join(s)}: {h}" for h, s in helps.items())
        out[name] = Option(
            typ, f.default if agree else None, text + ("" if agree else " (default: the strategy's own)")
        )
    return out


OPTIONS = strategy_options()
STRATEGY_HELP = {name: o.help for name, o in OPTIONS.items()}


def _with_strategy_fields(cls: type) -> type:
    """Add the strategy options (same names, types, defaults and help) to a GRPOConfig subclass, then make it a
    dataclass."""
    for name, o in OPTIONS.items():
        cls.__annotations__[name] = o.type
        setattr(cls, name, field(default=o.default, metadata={"help": f"reinforce-ada: {o.help}"}))
    return dataclass(cls)


TYPE_NAMES = {"int": "an integer", "float": "a real number", "bool": "True or False", "str": "a string", "None": "None"}


def _has_type(value: Any, name: str) -> bool:
    if name == "None":
        return value is None
    if name == "bool":
        return isinstance(value, bool)
    if name == "int":
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if name == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if name == "str":
        return isinstance(value, str)
    return True  # an annotation we do not check (no option has one today)


def _type_names(annotation: Any) -> list[str]:
    """["int", "None"] for "int | None", int | None or Optional[int] (HfArgumentParser swaps strings for types)."""
    if isinstance(annotation, str):
        return [t.strip() for t in annotation.split("|")]
    args = typing.get_args(annotation)
    return (
        [n for a in args for n in _type_names(a)]
        if args
        else ["None" if annotation is type(None) else annotation.__name__]
    )


def check_types(config: Any, names: list[str], annotations: dict[str, Any]) -> None:
    """Each strategy field's value has its annotated type (`"int | None"`, ...), else a ConfigError naming the field,
    the value and what would be valid. Dataclasses do not check types; the options' comparisons would fail with a
    bare TypeError (`k_pos="2"`) or accept a wrong number silently (`max_samples=2.5`)."""
    for name in names:
        value, allowed = getattr(config, name), _type_names(annotations[name])
        if not any(_has_type(value, t) for t in allowed):
            want = " or ".join(TYPE_NAMES.get(t, t) for t in allowed)
            raise ConfigError(f"{name}={value!r} ({type(value).__name__}) is not valid: {name} must be {want}")


def _user_names(message: str) -> str:
    """Rewrite our option names in an error message to the ones an AdaGRPOConfig user wrote."""
    for ours, theirs in RENAMED.items():
        message = re.sub(rf"(?<![\w.]){ours}=", f"{theirs}=", message)
    return message


@_with_strategy_fields
class AdaGRPOConfig(GRPOConfig):
    """TRL's `GRPOConfig` plus reinforce-ada's strategy options (see each strategy's `Options` for each).

    `num_generations` is the group size n trained on per prompt (uniform/dynamic: samples per prompt; seq: the
    downsampled group; est draws and trains on its own allocation). Each process runs the strategy on its share of
    the step's prompts, so `budget` (est) is per process, and so is `batch_normalize` (SPO's (A - mean) / std runs over
    each process's own trained samples, not the global batch: with P processes the statistics come from 1/P of the
    step; our trainer and verl normalise over the whole step).
    """

    strategy: str = field(
        default="seq",
        metadata={
            "help": "reinforce-ada: the sampling strategy, a registered name "
            f"({', '.join(STRATEGIES)}) or an arm spec such as 'seq:exit=positive'"
        },
    )
    replay: bool = field(
        default=False,
        metadata={"help": "reinforce-ada: replay is our own trainer's ([replay] enabled); AdaGRPOTrainer refuses it"},
    )
    max_verifier_error_share: float = field(
        default=0.5,
        metadata={
            "help": "reinforce-ada: stop training when more than this share of a step's samples has no usable reward "
            "(a reward function raised or gave NaN/inf, or all gave None); 1.0 never stops"
        },
    )

    def __post_init__(self) -> None:
        if isinstance(self.num_generations, int) and self.num_generations < 2:
            raise ConfigError(
                f"num_generations={self.num_generations}: TRL's GRPOTrainer trains groups of >= 2 completions (its "
                "GRPOConfig refuses fewer), so one sample per prompt (SPO's n = 1) runs in reinforce-ada's own trainer "
                "(`reinforce-ada train --strategy spo`); inside TRL, spo takes num_generations >= 2"
            )
        super().__post_init__()
        if self.scale_rewards == "batch":
            raise ConfigError(
                "scale_rewards='batch' is not supported by AdaGRPOTrainer: the strategy's baseline sets the "
                "advantage; use scale_std=True/False (per-group std) or leave scale_rewards at 'group'"
            )
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ConfigError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} is not supported by "
                "AdaGRPOTrainer; choose 'sum_then_normalize' (rewards are summed with reward_weights, then the "
                "strategy's baseline is applied)"
            )
        if self.scale_rewards == "none" and self.scale_std is None:
            self.scale_std = False
        local = self.per_device_train_batch_size * self.steps_per_generation
        if local % self.num_generations:
            raise ConfigError(
                f"per_device_train_batch_size * steps_per_generation = {local} must be a multiple of "
                f"num_generations={self.num_generations}: each process must hold whole prompt groups"
            )
        types = {"strategy": "str", **{name: o.type for name, o in OPTIONS.items()}}
        check_types(self, list(types), types)
        share = self.max_verifier_error_share
        if not (_has_type(share, "float") and 0 <= share <= 1):
            raise ConfigError(
                f"max_verifier_error_share={share!r} is not valid: it must be a share in [0, 1] (1.0: never stop)"
            )
        for i, w in enumerate(self.reward_weights or []):
            if not (_has_type(w, "float") and math.isfinite(w)):
                raise ConfigError(
                    f"reward_weights[{i}]={w!r} is not valid: every reward weight must be a finite real number"
                )
        self.strategy_config()  # validates every strategy field

    def strategy_config(self, seed: int = 0) -> StrategyConfig:
        """The StrategyConfig these options describe (`seed` is the strategy's own: TRL's seed + process index)."""
        try:
            base = parse_arm(self.strategy)
            given = {name: v for name in OPTIONS if (v := getattr(self, name)) is not None}
            own = options_class(type(base.options), {**user_set(base), **given}).__dataclass_fields__
            values, foreign = {"n": self.num_generations}, []
            for name, o in OPTIONS.items():
                value = getattr(self, name)
                if name in own and value is not None:
                    values[name] = value
                elif name not in own and value != o.default:
                    foreign.append(name)
            if foreign:
                raise ConfigError(
                    f"{', '.join(sorted(foreign))}: not an option of strategy {base.name!r}; leave "
                    f"{'it' if len(foreign) == 1 else 'them'} at the default or choose a strategy that has "
                    f"{'it' if len(foreign) == 1 else 'them'}"
                )
            return strategy_config(base.name, seed=seed, **{**user_set(base), **values})
        except ConfigError as e:
            raise ConfigError(_user_names(str(e))) from None

    @property
    def rows_multiple(self) -> int:
        """Each process's trained rows are padded to a multiple of this: TRL views rewards as (-1, num_generations)
        groups and splits the generation batch into steps_per_generation equal slices."""
        return math.lcm(self.num_generations, self.steps_per_generation)
