"""Strategy options: each strategy owns a frozen dataclass of them; what several share is written once, here.

1) `Options` is the base of every strategy's options class (`Seq.Options`, `Uniform.Options`, ...). It holds what
   the protocol itself reads for any strategy, in three shared groups: the baseline and weights (`BaselineOptions`:
   what a step's groups teach), the prompt memory (`sampling.memory.MemoryOptions`: the pass-rate belief across
   steps) and admission (`AdmissionOptions`: which rule hands the strategy its prompts, `sampling.admission`); plus
   `threshold` (what counts as correct) and `n` (the group size trained on, the integrations' group size).
2) A strategy's own options subclass `Options` and add fields (or override a shared default, e.g. Seq's baseline is
   the whole pool's mean); its `__post_init__` checks them after `super().__post_init__()`. An option is declared
   with `option(default, help, plan=...)` (`sampling.fields`).
3) A knob exists only where its feature is on. `FEATURES` maps a switch option and its value to the options that
   feature brings (`sampling.fields.FeatureOptions`, declared beside the feature's code): `select=NAME` the admission
   rule's (registered with the rule, `sampling.admission.registry`), `forgetting=drift` the drift discount's,
   `estimator=predictor|both` the predictor's, `length_cap=absolute|relative` the cap's (`sampling.length`).
   `options_class(cls, values)` is a strategy's options class joined with
   the feature classes its values turn on (built once per combination), `make_options(cls, **values)` an instance of
   it; `Options.replace` rebuilds the class when a switch changes. Options whose switches do not match their class
   are refused, naming the feature (an iw option without `select=iw` is an error, not a silent no-op).
4) The names are one vocabulary: config field, CLI flag (`--k-pos`), arm spec (`seq:k_pos=2`), TOML key, metric.
   Two strategies (or features) that share a name share its type (the contract test checks it).
The checks an options class runs (`at_least`, `choice`, `unit`, ...) are in `sampling.checks`.
This module knows no strategy: the registry (`sampling.strategies`) maps names to classes and `sampling.configure`
builds a config from flat names.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields, make_dataclass, replace
from functools import cache
from typing import Any, ClassVar

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import ADVANTAGES, BATCH_NORMS, CORRECTIONS
from reinforce_ada.sampling.checks import at_least, boolean, choice, of_type, positive
from reinforce_ada.sampling.fields import FeatureOptions, option, same_as
from reinforce_ada.sampling.length import LENGTH_CAPS, AbsoluteCapOptions, RelativeCapOptions
from reinforce_ada.sampling.memory.forgetting import DriftOptions
from reinforce_ada.sampling.memory.options import ESTIMATORS, MemoryOptions, resolved_evict
from reinforce_ada.sampling.memory.predictor import PredictorOptions
from reinforce_ada.sampling.objectives import OBJECTIVES

__all__ = [
    "ESTIMATORS",
    "FeatureOptions",
    "MemoryOptions",
    "Options",
    "at_least",
    "option",
    "resolved_evict",
    "same_as",
]


@dataclass(frozen=True)
class BaselineOptions:
    """What a step's groups teach: the baseline, and the per-prompt weights (`sampling.advantages`)."""

    advantage: str = option(
        "group",
        "baseline: group (GRPO: the kept group's mean), global (the whole pool's: Reinforce-Ada), leave_one_out "
        "(RLOO), tracker (SPO: the prompt's value from before this step), maxrl or corrected (the HM fork's); each "
        "strategy defaults to its paper's",
    )  # planned: a baseline decides whether a kept group of n has signal (`simulation.law`)
    scale_std: bool = option(
        True,
        "divide advantages by the std (GRPO's; off for seq/est, as the official code; never for leave_one_out, maxrl)",
        plan=False,
    )
    correction: str = option(
        "none", "explicit per-prompt weight f'(p_hat) from the pool (paper v3 §3.2): none or objective", plan=False
    )
    objective: str = option(
        "log", "objective f for allocation=objective and the optional correction: linear, log, power"
    )
    alpha: float = option(0.5, "exponent of the power objective")
    eps: float = option(1e-3, "floor added to p_hat in 1/sqrt(p_hat + eps) allocation and weights")
    batch_normalize: str = option(
        "none",
        "after each group's advantages, (A - mean) / std over the step's trained samples (SPO's): none, samples (each "
        "sample once) or tokens (weighted by completion tokens, as a token-mean loss sees them; SPO++)",
        plan=False,
    )

    def check_baseline(self) -> None:
        choice("advantage", self.advantage, tuple(ADVANTAGES))
        boolean("scale_std", self.scale_std)
        choice("correction", self.correction, CORRECTIONS)
        choice("batch_normalize", self.batch_normalize, BATCH_NORMS)
        choice("objective", self.objective, tuple(OBJECTIVES))
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"alpha={self.alpha} is out of range; it must be in (0, 1]")
        positive("eps", self.eps)


@dataclass(frozen=True)
class AdmissionOptions:
    """Which offered prompts a strategy is handed, before any rollout (`sampling.admission`)."""

    select: str = option(
        "none",
        "an admission rule in front of any strategy: none, greso, mopps, value (most signal per token), iw "
        "(importance-weighted, ours) or priority (SPO's draw); a rule's own options exist while select names it",
    )

    def check_admission(self) -> None:
        """`select` is checked against the admission registry when the strategy is (`sampling.strategies.validate`)."""


@dataclass(frozen=True)
class LengthOptions:
    """How long a sample may run (`sampling.length`): a lever where answers are long and their length varies."""

    length_cap: str = option(
        "none",
        "a per-sample cap on a completion, a capped sample scored as wrong: none, absolute (cap_tokens) or relative "
        "(cap_ratio x the prompt's running mean length of its correct answers)",
    )

    def check_length(self) -> None:
        choice("length_cap", self.length_cap, LENGTH_CAPS)


@dataclass(frozen=True)
class Options(BaselineOptions, MemoryOptions, AdmissionOptions, LengthOptions):
    """The options every strategy has (module docstring, 1); a strategy's own options subclass this."""

    features: ClassVar[tuple[type[FeatureOptions], ...]] = ()
    """The feature classes this class is composed with (module docstring, 3): () for a declared class."""

    threshold: float = option(0.5, "a sample is correct iff reward > threshold (the official code used 0.7)")
    n: int = option(4, "group size trained on per prompt (uniform/dynamic: samples per prompt; seq: kept per prompt)")

    def __post_init__(self) -> None:
        for f in fields(self):  # each of its declared type; no float NaN or infinite (evict: None or > 1 turns it off)
            value = getattr(self, f.name)
            of_type(f.name, value, type_name(f.type))
            if f.name != "evict" and isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name}={value!r} must be a finite number")
        if not 0.0 <= self.threshold < 1.0:
            raise ConfigError(
                f"threshold={self.threshold} is out of range; it must be in [0, 1) (a sample is correct iff reward > "
                "threshold; the built-in verifiers give 0 or 1)"
            )
        at_least("n", self.n, 1)
        self.check_baseline()
        self.check_memory()
        self.check_admission()
        self.check_length()
        wanted = features_for({s: getattr(self, s) for s in FEATURES})
        if set(wanted) != set(self.features):
            raise ConfigError(_mismatch(type(self), wanted))
        for feature in self.features:
            feature.check(self)

    def replace(self, *, whose: str = "these options", **changes: Any) -> Options:
        """A copy with options changed by name; a changed switch (`select`, `forgetting`, `estimator`) rebuilds the
        class, dropping the options of a feature turned off. `whose` names the options in an error."""
        values = {**{f.name: getattr(self, f.name) for f in fields(self)}, **changes}
        target = options_class(type(self), values)
        unknown = sorted(set(changes) - set(target.__dataclass_fields__))
        if unknown:
            raise ConfigError(unknown_message(target, unknown, whose))
        if target is type(self):
            return replace(self, **changes)
        return target(**{k: v for k, v in values.items() if k in target.__dataclass_fields__})


FEATURES: dict[str, dict[str, type[FeatureOptions]]] = {
    "select": {},  # each admission rule's own options, registered with the rule (`sampling.admission.registry`)
    "forgetting": {"drift": DriftOptions},
    "estimator": {"predictor": PredictorOptions, "both": PredictorOptions},
    "length_cap": {"absolute": AbsoluteCapOptions, "relative": RelativeCapOptions},
}
"""Switch option -> its value -> the options that feature brings (module docstring, 3)."""


def register_feature(switch: str, value: str, cls: type[FeatureOptions] | None) -> None:
    """`switch=value` brings the options of `cls` (None: none). Its fields must not shadow a shared option."""
    if switch not in FEATURES:
        raise ConfigError(f"{switch!r} is not a switch option; the switches are {list(FEATURES)}")
    if cls is None:
        FEATURES[switch].pop(value, None)
        return
    params = getattr(cls, "__dataclass_params__", None)
    if not (isinstance(cls, type) and issubclass(cls, FeatureOptions) and params is not None and params.frozen):
        raise ConfigError(
            f"{switch}={value}: Options = {cls!r} must be a frozen dataclass subclassing "
            "reinforce_ada.sampling.fields.FeatureOptions"
        )
    clash = sorted(set(cls.__dataclass_fields__) & set(Options.__dataclass_fields__))
    if clash:
        raise ConfigError(f"{switch}={value}: {cls.__name__} redeclares shared options {clash}; rename them")
    FEATURES[switch][value] = cls


def features_for(values: Mapping[str, Any]) -> tuple[type[FeatureOptions], ...]:
    """The feature classes the switch values turn on, in `FEATURES` order, each once."""
    out: list[type[FeatureOptions]] = []
    for switch, table in FEATURES.items():
        cls = table.get(values.get(switch)) if isinstance(values.get(switch), str) else None
        if cls is not None and cls not in out:
            out.append(cls)
    return tuple(out)


def declared(cls: type[Options]) -> type[Options]:
    """The options class a strategy declares (a composed class's base)."""
    return cls.__dict__.get("declared_as", cls)


def options_class(cls: type[Options], values: Mapping[str, Any] | None = None) -> type[Options]:
    """`cls` (a strategy's options class) with the features that `values`, over its defaults, turn on."""
    base = declared(cls)
    switches = {s: base.__dataclass_fields__[s].default for s in FEATURES if s in base.__dataclass_fields__}
    switches.update({s: v for s, v in (values or {}).items() if s in FEATURES})
    return _compose(base, features_for(switches))


def make_options(cls: type[Options], **values: Any) -> Options:
    """An instance of `options_class(cls, values)`; an option no feature of `values` brings is an error naming the
    feature that has it."""
    target = options_class(cls, values)
    unknown = sorted(set(values) - set(target.__dataclass_fields__))
    if unknown:
        raise ConfigError(unknown_message(target, unknown))
    return target(**values)


@cache
def _compose(base: type[Options], features: tuple[type[FeatureOptions], ...]) -> type[Options]:
    if not features:
        return base
    name = base.__name__ + "".join(f.__name__.removesuffix("Options") for f in features)
    namespace = {"features": features, "declared_as": base, "__module__": base.__module__, "__doc__": base.__doc__}

    def __reduce__(self: Options) -> tuple[Any, ...]:  # pickle finds no module attribute for a class made here
        return (_remake, (base, features, {f.name: getattr(self, f.name) for f in fields(self)}))

    namespace["__reduce__"] = __reduce__
    return make_dataclass(name, [], bases=(base, *features), frozen=True, namespace=namespace)


def _remake(base: type[Options], features: tuple[type[FeatureOptions], ...], values: dict[str, Any]) -> Options:
    """A composed options instance from its pickle (`_compose`'s `__reduce__`): the same class, the same values."""
    return _compose(base, features)(**values)


def feature_label(cls: type[FeatureOptions]) -> str:
    """`select=iw`, `estimator=predictor|both`: the switch values that bring `cls`."""
    return "; ".join(
        f"{switch}={'|'.join(v for v, c in table.items() if c is cls)}"
        for switch, table in FEATURES.items()
        if cls in table.values()
    )


def feature_owners(name: str) -> list[str]:
    """The switch values whose feature brings option `name` (`select=iw`)."""
    return [
        f"{switch}={value}"
        for switch, table in FEATURES.items()
        for value, c in table.items()
        if name in c.__dataclass_fields__
    ]


def unknown_message(cls: type[Options], keys: list[str], whose: str = "these options") -> str:
    """`keys` are not options of `cls` (a composed class): name the feature that brings each, where one does."""
    parts = []
    for key in keys:
        owners = feature_owners(key)
        parts.append(f"{key} (an option of {' or '.join(owners)}: set that too)" if owners else key)
    return f"{', '.join(parts)}: not an option of {whose}; its options are {sorted(cls.__dataclass_fields__)}"


def _mismatch(cls: type[Options], wanted: tuple[type[FeatureOptions], ...]) -> str:
    on = ", ".join(feature_label(f) for f in wanted) or "no feature"
    return (
        f"{cls.__name__}: its switches turn on {on}, but the class is built for "
        f"{', '.join(feature_label(f) for f in cls.features) or 'none'}; build options with "
        "sampling.options.make_options(cls, ...) (or strategy_config), which joins each feature's options"
    )


GROUPS: dict[str, type] = {
    "baseline and weights": BaselineOptions,
    "prompt memory": MemoryOptions,
    "admission": AdmissionOptions,
    "length": LengthOptions,
}
"""The shared option groups, as `--help` and the docs show them (the strategy's own options come first)."""


@dataclass(frozen=True)
class OptionSpec:
    """One option of an options class, as the CLI, TOML, TRL and the docs read it."""

    name: str
    type: str
    """The declared type as written (`int | None`): what `coerce_value` converts text to."""
    default: Any
    help: str
    group: str
    """`own` (the strategy's), `common` (threshold, n), a feature's label (`select=iw`) or a key of `GROUPS`."""
    plan: bool


def option_specs(cls: type[Options]) -> list[OptionSpec]:
    """Every option of an options class (a composed one included): its own first, then the common ones, then those
    of the features it is composed with, then the shared groups."""
    shared = {f.name: g for g, base in GROUPS.items() for f in fields(base)}
    common = {f.name for f in fields(Options)} - set(shared)
    labels = [feature_label(fc) for fc in cls.features]
    featured = {f.name: label for fc, label in zip(cls.features, labels, strict=True) for f in fields(fc)}
    specs = []
    for f in fields(cls):
        group = shared.get(f.name) or featured.get(f.name) or ("common" if f.name in common else "own")
        specs.append(
            OptionSpec(
                f.name, type_name(f.type), f.default, f.metadata.get("help", ""), group, f.metadata.get("plan", True)
            )
        )
    order = {"own": 0, "common": 1, **{g: 2 + i for i, g in enumerate([*labels, *GROUPS])}}
    return sorted(specs, key=lambda s: order[s.group])


def type_name(t: Any) -> str:
    """A field's declared type as text (`int | None`): annotations are strings under `from __future__ import
    annotations`, classes or typing objects without it (an options class written in a user's file)."""
    if isinstance(t, str):
        return t
    if isinstance(t, type) and not getattr(t, "__args__", None):
        return t.__name__
    args = typing.get_args(t)
    if args and typing.get_origin(t) in (typing.Union, types.UnionType):  # Optional[int], Union[int, None], int | None
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    return str(t).replace("typing.", "").replace("NoneType", "None")


def coerce_value(where: str, value: Any, typ: str) -> Any:
    """Check and convert a TOML, CLI or arm-spec value against a field's declared type (a string such as
    `int | None`); the error names `where` and the type."""
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
