"""Sampling strategies in one literal registry, all built as `cls(cfg)`; each implements `sampling.protocol` once."""

from __future__ import annotations

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import STRATEGY_NAMES, StrategyConfig
from reinforce_ada.sampling.protocol import PoolStrategy, Strategy, downsample
from reinforce_ada.sampling.strategies.dynamic import Dynamic
from reinforce_ada.sampling.strategies.est import Est, allocate, allocation_weights
from reinforce_ada.sampling.strategies.seq import Seq
from reinforce_ada.sampling.strategies.uniform import Uniform

STRATEGIES: dict[str, type[PoolStrategy]] = {"uniform": Uniform, "dynamic": Dynamic, "seq": Seq, "est": Est}
assert tuple(STRATEGIES) == STRATEGY_NAMES


def build_strategy(cfg: StrategyConfig, **kwargs) -> PoolStrategy:
    """Build the strategy named by `cfg.name`. `predictor=` is passed through to `est`."""
    if cfg.name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {cfg.name!r}; choose one of {sorted(STRATEGIES)}")
    return STRATEGIES[cfg.name](cfg, **kwargs)


__all__ = [
    "STRATEGIES",
    "Dynamic",
    "Est",
    "PoolStrategy",
    "Seq",
    "Strategy",
    "Uniform",
    "allocate",
    "allocation_weights",
    "build_strategy",
    "downsample",
]
