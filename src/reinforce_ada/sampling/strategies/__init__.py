"""Sampling strategies in one literal registry, all built as `cls(cfg)`; each implements `sampling.protocol` once.

`greso` and `mopps` are prompt-admission rules over a base sampler (`strategies.select`): the names build DAPO
dynamic sampling + GRESO (as the GRESO paper) and GRPO + MoPPS (as the MoPPS paper); `select=greso|mopps` puts the
same rule in front of any other strategy, and `evict` (on by default for pilot_commit) adds eviction.
"""

from __future__ import annotations

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import STRATEGY_NAMES, StrategyConfig
from reinforce_ada.sampling.protocol import PoolStrategy, Strategy, downsample
from reinforce_ada.sampling.strategies.dynamic import Dynamic
from reinforce_ada.sampling.strategies.est import Est, allocate, allocate_counts, allocation_weights, knapsack_allocate
from reinforce_ada.sampling.strategies.knapsack import Knapsack, knapsack_budget
from reinforce_ada.sampling.strategies.pilot_commit import PilotCommit
from reinforce_ada.sampling.strategies.select import needs_admission, with_admission
from reinforce_ada.sampling.strategies.seq import Seq
from reinforce_ada.sampling.strategies.uniform import Uniform

STRATEGIES: dict[str, type[PoolStrategy]] = {
    "uniform": Uniform,
    "dynamic": Dynamic,
    "seq": Seq,
    "est": Est,
    "pilot_commit": PilotCommit,
    "knapsack": Knapsack,
    "greso": Dynamic,
    "mopps": Uniform,
}
"""Name -> the sampler class; `build_strategy` adds the admission stage where the config asks for one."""
assert tuple(STRATEGIES) == STRATEGY_NAMES


def build_strategy(cfg: StrategyConfig, **kwargs) -> PoolStrategy:
    """Build the strategy named by `cfg.name`. `predictor=` (prompt -> p_hat) is passed through to `est`/`knapsack`."""
    if cfg.name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {cfg.name!r}; choose one of {sorted(STRATEGIES)}")
    cls = STRATEGIES[cfg.name]
    if kwargs and not issubclass(cls, Est):
        raise ConfigError(f"strategy {cfg.name!r} takes no {sorted(kwargs)} (only est and knapsack take predictor=)")
    if needs_admission(cfg):
        cls = with_admission(cls)
    return cls(cfg, **kwargs)


__all__ = [
    "STRATEGIES",
    "Dynamic",
    "Est",
    "Knapsack",
    "PilotCommit",
    "PoolStrategy",
    "Seq",
    "Strategy",
    "Uniform",
    "allocate",
    "allocate_counts",
    "allocation_weights",
    "build_strategy",
    "downsample",
    "knapsack_allocate",
    "knapsack_budget",
    "with_admission",
]
