"""reinforce-ada: RL from verifiable rewards that spends its sampling budget where the learning signal is."""

from __future__ import annotations

from reinforce_ada.advantages import ADVANTAGES, compute_advantages
from reinforce_ada.config import StrategyConfig
from reinforce_ada.errors import ConfigError
from reinforce_ada.objectives import OBJECTIVES
from reinforce_ada.plan import plan, plan_monte_carlo
from reinforce_ada.rollout import Ledger, StepBatch, collect
from reinforce_ada.sim import SimConfig, SimulatedPolicy
from reinforce_ada.strategies import STRATEGIES, build_strategy
from reinforce_ada.types import Group, Prompt, Request, Sample

__version__ = "0.1.0"
__all__ = [
    "ADVANTAGES",
    "OBJECTIVES",
    "STRATEGIES",
    "ConfigError",
    "Group",
    "Ledger",
    "Prompt",
    "Request",
    "Sample",
    "SimConfig",
    "SimulatedPolicy",
    "StepBatch",
    "StrategyConfig",
    "build_strategy",
    "collect",
    "compute_advantages",
    "plan",
    "plan_monte_carlo",
]
