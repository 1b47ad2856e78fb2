"""A `StrategyConfig` from flat names: keyword arguments, arm specs, TOML tables and command-line flags.

The vocabulary is flat (`k_pos`, `select`, `estimator`: one name per option, whatever group declares it); which
options a name has is its class's `Options` (`sampling.options`), so a strategy registered from outside the package
brings its own options to every entry point below with no edit here.
1) `strategy_config(name, **options)`: the named strategy's options class with those values; an option the strategy
   does not have is an error naming it, the strategies that have it and the strategy's own options.
2) `switch(cfg, name)`: the same config for another strategy -- the options set away from the old strategy's
   defaults that the new strategy also has are kept, everything else takes the new strategy's defaults.
3) `parse_arm("seq:exit=positive,k_pos=2", base)`: an arm spec; on `base` means `switch(base, name)` first.
4) `config_from_table(table, base, source)`: a TOML `[strategy]` table. Tolerant of one thing only: a config.toml
   written by 0.3 listed every strategy's fields (and one written by 0.4 every feature's options), so a key that is
   not this strategy's option but another's (or a feature's that is off), at that option's default value, is ignored
   (changing nothing); any other unknown key is an error.
A feature's options (`select=iw` brings `iw_mix`, ...: `sampling.options.FEATURES`) are in the vocabulary while the
values given, over the strategy's defaults, turn the feature on; given without it they are an error naming it.
"""

from __future__ import annotations

import difflib
from dataclasses import fields
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.options import FEATURES, coerce_value, feature_owners, options_class, type_name
from reinforce_ada.sampling.strategies import AUTO, STRATEGIES, strategy_class, validate


def _class(name: Any) -> type:
    if name not in STRATEGIES:
        raise ConfigError(f"name={name!r} is not valid; choose one of {list(STRATEGIES)}")
    return strategy_class(name)


def _unknown(name: str, keys: list[str], where: str = "", values: dict[str, Any] | None = None) -> ConfigError:
    target = options_class(strategy_class(name).Options, values)
    own = [f.name for f in fields(target)]
    parts = []
    for key in keys:
        owners = [n for n, c in STRATEGIES.items() if key in c.Options.__dataclass_fields__ and n != "auto"]
        owners += feature_owners(key)
        close = difflib.get_close_matches(key, own, n=1)
        parts.append(
            f"{key} (an option of {', '.join(owners)})"
            if owners
            else f"{key} (did you mean {close[0]}?)"
            if close
            else key
        )
    return ConfigError(f"{where}{', '.join(parts)}: not an option of strategy {name!r}; its options are {sorted(own)}")


def strategy_config(name: str = "seq", *, seed: int = 0, **options: Any) -> StrategyConfig:
    """The config of strategy `name` with these options (Python values; text is converted as the CLI does)."""
    if name == "auto":  # resolved once, here: a config (and its config.toml) names what actually runs
        name = AUTO
    cls = _class(name)
    target = options_class(cls.Options, options)
    unknown = sorted(set(options) - set(target.__dataclass_fields__))
    if unknown:
        raise _unknown(name, unknown, values=options)
    cfg = StrategyConfig(name, target(**options), seed)
    validate(cls, cfg)
    return cfg


def user_set(cfg: StrategyConfig) -> dict[str, Any]:
    """The options of `cfg` that differ from their defaults."""
    return {f.name: v for f in fields(cfg.options) if (v := getattr(cfg.options, f.name)) != f.default}


def switch(cfg: StrategyConfig, name: str, **changes: Any) -> StrategyConfig:
    """`cfg` for strategy `name` (module docstring, 2), then `changes`."""
    if name == "auto":
        name = AUTO
    mine = user_set(cfg)
    if name != cfg.name:
        known = options_class(_class(name).Options, {**mine, **changes}).__dataclass_fields__
        mine = {k: v for k, v in mine.items() if k in known}
    return strategy_config(name, seed=cfg.seed, **{**mine, **changes})


def parse_arm(spec: str, base: StrategyConfig | None = None) -> StrategyConfig:
    """`seq`, `seq:exit=positive`, `uniform:n=16,scale_std=false` -> a StrategyConfig (on `base`, if given)."""
    name, _, opts = spec.strip().partition(":")
    if name == "auto":
        name = AUTO
    cls = _class(name)
    raw: dict[str, str] = {}
    for kv in filter(None, opts.split(",")):
        key, eq, value = kv.partition("=")
        if not eq:
            known = sorted([f.name for f in fields(cls.Options)] + ["seed"])
            raise ConfigError(f"bad option {kv!r} in arm {spec!r}; use key=value with key in {known}")
        key = key.strip().replace("-", "_")
        if key in raw:
            raise ConfigError(f"arm {spec!r}: {key} is given twice ({raw[key]!r} and {value.strip()!r}); give it once")
        raw[key] = value.strip()
    on = {**(user_set(base) if base is not None else {}), **{k: v for k, v in raw.items() if k in FEATURES}}
    types = {f.name: type_name(f.type) for f in fields(options_class(cls.Options, on))}
    types["seed"] = "int"  # the strategy's own generator, as in a TOML table
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in types:
            raise _unknown(name, [key], f"arm {spec!r}: ", on)
        changes[key] = coerce_value(key, value, types[key])
    seed = changes.pop("seed", None)
    cfg = strategy_config(name, **changes) if base is None else switch(base, name, **changes)
    return cfg if seed is None else cfg.replace(seed=seed)


def arm_label(cfg: StrategyConfig, base: StrategyConfig | None = None) -> str:
    """The shortest spec that `parse_arm` turns back into `cfg` on `base`."""
    ref = parse_arm(cfg.name, base)
    diff = [f"{f.name}={getattr(cfg.options, f.name)}" for f in fields(cfg.options) if _differs(cfg, ref, f.name)]
    return cfg.name + (":" + ",".join(diff) if diff else "")


def _differs(a: StrategyConfig, b: StrategyConfig, key: str) -> bool:
    """`a`'s option `key` differs from `b`'s (from its default where `b` has no such option: a feature `b` lacks)."""
    other = b.options.__dataclass_fields__.get(key)
    return getattr(a.options, key) != (
        a.options.__dataclass_fields__[key].default if other is None else getattr(b.options, key)
    )


def config_from_table(table: dict[str, Any], base: StrategyConfig, source: str) -> StrategyConfig:
    """A TOML `[strategy]` table over `base` (module docstring, 4); errors name `source` and the key."""
    values = dict(table)
    name = values.pop("name", base.name)
    seed = values.pop("seed", base.seed)
    if name == "auto":
        name = AUTO
    if not isinstance(name, str) or name not in STRATEGIES:
        raise ConfigError(f"{source}: strategy.name={name!r} is not valid; choose one of {list(STRATEGIES)}")
    cls = strategy_class(name)
    on = {**user_set(base), **{k: v for k, v in values.items() if k in FEATURES}}
    types = {f.name: type_name(f.type) for f in fields(options_class(cls.Options, on))}
    changes, unknown = {}, []
    for key, value in values.items():
        if key in types:
            changes[key] = coerce_value(f"strategy.{key}", value, types[key])
        elif not _at_another_default(key, value):
            unknown.append(key)
    if unknown:
        raise _unknown(name, sorted(unknown), f"{source}: [strategy] ", on)
    seed = coerce_value("strategy.seed", seed, "int")
    if name == base.name:
        return strategy_config(name, seed=seed, **{**user_set(base), **changes})
    return switch(base.replace(seed=seed), name, **changes)


def _at_another_default(key: str, value: Any) -> bool:
    """`key = value` is a registered strategy's or feature's option at its default (0.3's config.toml wrote every
    strategy's options, 0.4's every feature's)."""
    classes = [*(c.Options for c in STRATEGIES.values()), *(f for t in FEATURES.values() for f in t.values())]
    for cls in classes:
        f = cls.__dataclass_fields__.get(key)
        if f is not None:
            try:
                if coerce_value(key, value, type_name(f.type)) == f.default:
                    return True
            except ConfigError:
                continue
    return False


def changed_options(saved: dict[str, Any], cfg: StrategyConfig) -> list[str]:
    """The options (and name) whose value in `saved` (a `to_dict()` stored with a checkpoint) differs from `cfg`'s.

    A dict written by 0.3 held every strategy's fields, and None for "the strategy's default" (baseline, select,
    evict): keys `cfg` does not have are not compared, and None matches the strategy's default."""
    mine = cfg.to_dict()
    default = {f.name: f.default for f in fields(cfg.options)}
    out = []
    for key, value in saved.items():
        if key == "seed" or key not in mine or mine[key] == value:
            continue
        if value is None and key != "name" and mine[key] == default.get(key, object()):
            continue
        out.append(key)
    return sorted(out)
