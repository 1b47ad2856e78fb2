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
   written by 0.3 listed every strategy's fields, so a key that is not this strategy's option but another's, at that
   option's default value, is ignored (changing nothing); any other unknown key is an error.
"""

from __future__ import annotations

import difflib
from dataclasses import fields
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.options import coerce_value, type_name
from reinforce_ada.sampling.strategies import AUTO, STRATEGIES, strategy_class, validate


def _class(name: Any) -> type:
    if name not in STRATEGIES:
        raise ConfigError(f"name={name!r} is not valid; choose one of {list(STRATEGIES)}")
    return strategy_class(name)


def _unknown(name: str, keys: list[str], where: str = "") -> ConfigError:
    cls = strategy_class(name)
    own = [f.name for f in fields(cls.Options)]
    parts = []
    for key in keys:
        owners = [n for n, c in STRATEGIES.items() if key in c.Options.__dataclass_fields__ and n != "auto"]
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
    known = cls.Options.__dataclass_fields__
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise _unknown(name, unknown)
    cfg = StrategyConfig(name, cls.Options(**options), seed)
    validate(cls, cfg)
    return cfg


def user_set(cfg: StrategyConfig) -> dict[str, Any]:
    """The options of `cfg` that differ from its strategy's defaults."""
    default = strategy_class(cfg.name).Options()
    return {f.name: v for f in fields(cfg.options) if (v := getattr(cfg.options, f.name)) != getattr(default, f.name)}


def switch(cfg: StrategyConfig, name: str, **changes: Any) -> StrategyConfig:
    """`cfg` for strategy `name` (module docstring, 2), then `changes`."""
    if name == "auto":
        name = AUTO
    known = _class(name).Options.__dataclass_fields__
    kept = {k: v for k, v in user_set(cfg).items() if k in known} if name != cfg.name else user_set(cfg)
    return strategy_config(name, seed=cfg.seed, **{**kept, **changes})


def parse_arm(spec: str, base: StrategyConfig | None = None) -> StrategyConfig:
    """`seq`, `seq:exit=positive`, `uniform:n=16,scale_std=false` -> a StrategyConfig (on `base`, if given)."""
    name, _, opts = spec.strip().partition(":")
    if name == "auto":
        name = AUTO
    cls = _class(name)
    types = {f.name: type_name(f.type) for f in fields(cls.Options)}
    types["seed"] = "int"  # the strategy's own generator, as in a TOML table
    changes: dict[str, Any] = {}
    for kv in filter(None, opts.split(",")):
        key, eq, raw = kv.partition("=")
        key = key.strip().replace("-", "_")
        if not eq:
            raise ConfigError(f"bad option {kv!r} in arm {spec!r}; use key=value with key in {sorted(types)}")
        if key not in types:
            raise _unknown(name, [key], f"arm {spec!r}: ")
        changes[key] = coerce_value(key, raw.strip(), types[key])
    seed = changes.pop("seed", None)
    cfg = strategy_config(name, **changes) if base is None else switch(base, name, **changes)
    return cfg if seed is None else cfg.replace(seed=seed)


def arm_label(cfg: StrategyConfig, base: StrategyConfig | None = None) -> str:
    """The shortest spec that `parse_arm` turns back into `cfg` on `base`."""
    ref = parse_arm(cfg.name, base)
    diff = [f"{f.name}={getattr(cfg.options, f.name)}" for f in fields(cfg.options) if _differs(cfg, ref, f.name)]
    return cfg.name + (":" + ",".join(diff) if diff else "")


def _differs(a: StrategyConfig, b: StrategyConfig, key: str) -> bool:
    return getattr(a.options, key) != getattr(b.options, key)


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
    types = {f.name: type_name(f.type) for f in fields(cls.Options)}
    changes, unknown = {}, []
    for key, value in values.items():
        if key in types:
            changes[key] = coerce_value(f"strategy.{key}", value, types[key])
        elif not _at_another_default(key, value):
            unknown.append(key)
    if unknown:
        raise _unknown(name, sorted(unknown), f"{source}: [strategy] ")
    seed = coerce_value("strategy.seed", seed, "int")
    if name == base.name:
        return strategy_config(name, seed=seed, **{**user_set(base), **changes})
    return switch(base.replace(seed=seed), name, **changes)


def _at_another_default(key: str, value: Any) -> bool:
    """`key = value` is a registered strategy's option at its default (0.3's config.toml wrote them all)."""
    for cls in STRATEGIES.values():
        f = cls.Options.__dataclass_fields__.get(key)
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
    default = strategy_class(cfg.name).Options()
    out = []
    for key, value in saved.items():
        if key == "seed" or key not in mine or mine[key] == value:
            continue
        if value is None and key != "name" and mine[key] == getattr(default, key, object()):
            continue
        out.append(key)
    return sorted(out)
