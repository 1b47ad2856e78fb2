"""Sampling strategies in one literal registry, all built as `cls(cfg)`."""

from __future__ import annotations

from reinforce_ada.config import STRATEGY_NAMES, StrategyConfig
from reinforce_ada.errors import ConfigError
from reinforce_ada.strategies.base import PoolStrategy, Strategy, downsample
from reinforce_ada.strategies.dynamic import Dynamic
from reinforce_ada.strategies.est import Est, allocate, allocation_weights
from reinforce_ada.strategies.seq import Seq
from reinforce_ada.strategies.tracker import PassRateTracker
from reinforce_ada.strategies.uniform import Uniform

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
    "PassRateTracker",
    "PoolStrategy",
    "Seq",
    "Strategy",
    "Uniform",
    "allocate",
    "allocation_weights",
    "build_strategy",
    "downsample",
]
