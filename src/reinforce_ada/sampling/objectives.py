"""Objective weights f'(p) for maximising E_x[f(p_theta(x))].

The gradient of E[f(p)] weights each prompt by f'(p) (paper v3 §2.2):
1) `linear` f(p) = p: weight 1 (plain RL / GRPO without std);
2) `log` f(p) = log p: weight 1/p (the paper's recommended objective);
3) `power` f(p) = p^alpha: weight alpha * p^(alpha - 1) (1/(2 sqrt p) at alpha = 1/2).
Every entry has one signature `(p, *, alpha, eps) -> weights`; p is clamped to [eps, 1] so p -> 0 stays finite.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reinforce_ada.errors import ConfigError

ObjectiveFn = Callable[..., np.ndarray]


def linear(p: np.ndarray, *, alpha: float = 0.5, eps: float = 1e-3) -> np.ndarray:
    return np.ones_like(np.asarray(p, dtype=float))


def log(p: np.ndarray, *, alpha: float = 0.5, eps: float = 1e-3) -> np.ndarray:
    return 1.0 / np.clip(np.asarray(p, dtype=float), eps, 1.0)


def power(p: np.ndarray, *, alpha: float = 0.5, eps: float = 1e-3) -> np.ndarray:
    if not 0.0 < alpha <= 1.0:
        raise ConfigError(f"objective 'power' needs alpha in (0, 1], got {alpha}")
    return alpha * np.clip(np.asarray(p, dtype=float), eps, 1.0) ** (alpha - 1.0)


OBJECTIVES: dict[str, ObjectiveFn] = {"linear": linear, "log": log, "power": power}


def get_objective(name: str | ObjectiveFn) -> ObjectiveFn:
    """Look up an objective by name, or accept a custom callable `f(p, *, alpha, eps) -> weights`."""
    if callable(name):
        return name
    if name not in OBJECTIVES:
        raise ConfigError(f"unknown objective {name!r}; choose one of {sorted(OBJECTIVES)} or pass a callable")
    return OBJECTIVES[name]
