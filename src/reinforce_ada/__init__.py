"""reinforce-ada: RL from verifiable rewards that spends its sampling budget where the learning signal is.

The folders follow the data path, each importing only the ones listed before it:
`sampling` (strategies, advantages, objectives, prompt memory and order, the protocol and its two drivers) ->
`simulation` (the simulated policy, planner and studies) -> `models` -> `engines` -> `tasks` -> `evaluation` ->
`training` -> `bench`, `cli` on top. `types` (the records) and `errors`, `cache` sit below everything.
"""

from __future__ import annotations

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import ADVANTAGES, compute_advantages
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.ledger import Ledger, StepBatch
from reinforce_ada.sampling.objectives import OBJECTIVES
from reinforce_ada.sampling.options import Options, option
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import STRATEGIES, build_strategy, register_strategy, strategy_class
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.sampling.traits import Traits
from reinforce_ada.simulation.plan import plan, plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy, hard_pool
from reinforce_ada.types import Group, Prompt, Request, Sample

__version__ = "0.4.0"
__all__ = [
    "ADVANTAGES",
    "OBJECTIVES",
    "STRATEGIES",
    "ConfigError",
    "Group",
    "Ledger",
    "Options",
    "PoolStrategy",
    "Prompt",
    "Request",
    "Sample",
    "SimConfig",
    "SimulatedPolicy",
    "StepBatch",
    "StrategyConfig",
    "Traits",
    "build_strategy",
    "collect",
    "collect_streaming",
    "compute_advantages",
    "hard_pool",
    "option",
    "parse_arm",
    "plan",
    "plan_monte_carlo",
    "register_strategy",
    "strategy_class",
    "strategy_config",
]
