"""Checks of a `StrategyConfig`, and the vocabulary they check against (re-exported by `sampling.config`).

Every message names the field, the value and what would be valid. `validate` runs in `StrategyConfig.__post_init__`,
then hands over to the named strategy's own `validate` (`sampling.strategies`).
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from reinforce_ada.errors import ConfigError

if TYPE_CHECKING:
    from reinforce_ada.sampling.config import StrategyConfig

EXITS = ("positive", "balanced")
SELECTIONS = ("random", "earliest")
UNRESOLVED = ("keep", "drop")
ALLOCATIONS = ("inv_sqrt", "variance", "objective", "knapsack", "remainder", "signal")
RESIDUALS = ("inv_sqrt", "none")
SELECTS = ("none", "greso", "mopps", "value", "iw")
ESTIMATORS = ("tracker", "predictor", "both", "oracle")
"""Where a pass-rate estimate comes from (`sampling.memory`): the one list."""
CONFORMAL_SCORES = ("first_success", "pass_rate")


def _traits(name: str):
    """The named strategy's traits (`sampling.traits`), from the registry: the only list of strategy names."""
    from reinforce_ada.sampling.strategies import strategy_class

    return strategy_class(name).traits


def strategy_names() -> tuple[str, ...]:
    from reinforce_ada.sampling.strategies import STRATEGIES

    return tuple(STRATEGIES)


def _choice(name: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid; choose one of {list(valid)}")


def _at_least(name: str, value: Any, lo: float) -> None:
    if value < lo:
        raise ConfigError(f"{name}={value!r} is out of range; it must be >= {lo}")


def _finite(c: StrategyConfig) -> None:
    """No float field may be NaN or infinite (`evict` aside: None or > 1 turns eviction off)."""
    for f in fields(c):
        value = getattr(c, f.name)
        if f.name != "evict" and isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{f.name}={value!r} must be a finite number")


def validate(c: StrategyConfig) -> None:
    """Check every field; the message names the field and the valid range."""
    _finite(c)
    _choice("name", c.name, strategy_names())
    _choice("exit", c.exit, EXITS)
    _choice("selection", c.selection, SELECTIONS)
    _choice("unresolved", c.unresolved, UNRESOLVED)
    _choice("allocation", c.allocation, ALLOCATIONS)
    _choice("residual", c.residual, RESIDUALS)
    from reinforce_ada.sampling.objectives import OBJECTIVES

    _choice("objective", c.objective, tuple(OBJECTIVES))
    if c.advantage is not None:
        from reinforce_ada.sampling.advantages import ADVANTAGES

        _choice("advantage", c.advantage, tuple(ADVANTAGES))
    _choice("correction", c.correction, ("none", "objective"))
    for name in ("n", "samples_per_round", "max_samples", "min_samples", "max_gen_batches"):
        _at_least(name, getattr(c, name), 1)
    if c.n > c.max_samples:
        raise ConfigError(f"n={c.n} must be <= max_samples={c.max_samples} (cannot train on more than is drawn)")
    if c.min_samples > c.max_samples:
        raise ConfigError(f"min_samples={c.min_samples} must be <= max_samples={c.max_samples}")
    if c.k_pos is not None:
        _at_least("k_pos", c.k_pos, 0)
    if c.k_neg is not None:
        _at_least("k_neg", c.k_neg, 0)
    if c.resolved_k_pos + c.resolved_k_neg < 1:
        raise ConfigError(
            f"k_pos + k_neg = 0 (exit={c.exit!r}): every prompt would retire before its first sample; "
            "set k_pos >= 1 (or k_neg >= 1)"
        )
    if c.resolved_k_pos + c.resolved_k_neg > c.max_samples:
        raise ConfigError(
            f"k_pos + k_neg = {c.resolved_k_pos + c.resolved_k_neg} exceeds max_samples={c.max_samples}: "
            "no prompt could ever retire"
        )
    if c.budget is not None:
        _at_least("budget", c.budget, 2)  # a budget below 2 samples cannot give any prompt a group
    if not 0.0 <= c.threshold < 1.0:
        raise ConfigError(
            f"threshold={c.threshold} is out of range; it must be in [0, 1) (a sample is correct iff reward > "
            "threshold; the built-in verifiers give 0 or 1)"
        )
    if c.seed < 0:
        raise ConfigError(f"seed={c.seed} is out of range; it must be >= 0")
    if not 0.0 < c.decay <= 1.0:
        raise ConfigError(f"decay={c.decay} is out of range; it must be in (0, 1]")
    for name in ("prior_alpha", "prior_beta", "eps"):
        if not getattr(c, name) > 0:
            raise ConfigError(f"{name}={getattr(c, name)} is out of range; it must be > 0")
    if not 0.0 < c.alpha <= 1.0:
        raise ConfigError(f"alpha={c.alpha} is out of range; it must be in (0, 1]")
    _at_least("variance_tol", c.variance_tol, 0.0)
    _validate_allocators(c)
    _validate_conformal(c)
    check_replay(c)
    from reinforce_ada.sampling.strategies import strategy_class

    strategy_class(c.name).validate(c)


def _unit(name: str, value: float, *, open_lo: bool = False, open_hi: bool = False) -> None:
    lo_ok = value > 0.0 if open_lo else value >= 0.0
    hi_ok = value < 1.0 if open_hi else value <= 1.0
    if not (lo_ok and hi_ok):
        lo, hi = "(0" if open_lo else "[0", "1)" if open_hi else "1]"
        raise ConfigError(f"{name}={value!r} is out of range; it must be in {lo}, {hi}")


def _validate_allocators(c: StrategyConfig) -> None:
    """The fields of the strategies beyond the paper (docs/allocators.md)."""
    _choice("estimator", c.estimator, ESTIMATORS)
    if c.select is not None:
        _choice("select", c.select, SELECTS)
        built_in = _traits(c.name).default_select
        if built_in != "none" and c.select != built_in:
            raise ConfigError(
                f"select={c.select!r} contradicts name={c.name!r} (which is select={built_in!r} built in)"
            )
    _unit("select_explore", c.select_explore)
    if not 0.0 < c.forget <= 1.0:
        raise ConfigError(f"forget={c.forget} is out of range; it must be in (0, 1] (1 = off)")
    if not c.predictor_lr > 0:
        raise ConfigError(f"predictor_lr={c.predictor_lr} is out of range; it must be > 0")
    _at_least("predictor_dim", c.predictor_dim, 0)
    _at_least("history", c.history, 2)
    _choice("knapsack_value", c.knapsack_value, ("total", "reference"))
    _choice("knapsack_estimate", c.knapsack_estimate, ("recent", "last_visit"))
    _unit("give_up", c.give_up, open_hi=True)
    _at_least("pilot", c.pilot, 1)
    if c.pilot > c.max_samples:
        raise ConfigError(f"pilot={c.pilot} must be <= max_samples={c.max_samples} (the pilot is part of the cap)")
    _unit("commit_lo", c.commit_lo)
    _unit("commit_hi", c.commit_hi)
    if c.commit_lo > c.commit_hi:
        raise ConfigError(f"commit_lo={c.commit_lo} must be <= commit_hi={c.commit_hi} (the commit band is empty)")
    if c.evict is not None and not c.evict > 0:
        raise ConfigError(f"evict={c.evict} is out of range; it must be > 0 (a value > 1 turns eviction off)")
    _unit("zero_variance_target", c.zero_variance_target)
    _unit("target", c.target)
    _at_least("candidates", c.candidates, 1)
    _unit("iw_mix", c.iw_mix)  # select=iw (sampling.iw)
    if isinstance(c.iw_clip, bool) or not c.iw_clip >= 1.0:
        raise ConfigError(
            f"iw_clip={c.iw_clip!r} is out of range; it must be >= 1 (the cap on a Horvitz-Thompson weight)"
        )
    if not isinstance(c.iw_weights, bool):
        raise ConfigError(f"iw_weights={c.iw_weights!r} is not valid; it must be true or false")


def parse_budget_grid(text: str) -> tuple[int, ...]:
    """`"2/4/8/16/32"` -> (2, 4, 8, 16, 32), sorted (as trl-cgrpo sorts its grid); the error names `budget_grid`."""
    hint = "write distinct positive integers separated by '/', e.g. 2/4/8/16/32 (a comma separates arm-spec options)"
    if not isinstance(text, str):
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}")
    try:
        grid = [int(x) for x in text.split("/")]
    except ValueError:
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}") from None
    if any(k < 1 for k in grid) or len(set(grid)) != len(grid):
        raise ConfigError(f"budget_grid={text!r} is not valid; {hint}")
    return tuple(sorted(grid))


def _validate_conformal(c: StrategyConfig) -> None:
    """The conformal strategy's fields (trl-cgrpo's CGRPOConfig checks, in our names)."""
    parse_budget_grid(c.budget_grid)
    if c.conformal_score == "aps":
        raise ConfigError(
            "conformal_score='aps' is not available: trl-cgrpo's APS score ranks extracted answer strings against a "
            f"reference answer, and a strategy sees rewards only; choose one of {list(CONFORMAL_SCORES)}"
        )
    _choice("conformal_score", c.conformal_score, CONFORMAL_SCORES)
    if c.conformal_delta is not None:
        _unit("conformal_delta", c.conformal_delta, open_lo=True, open_hi=True)
    _unit("delta_margin", c.delta_margin, open_hi=True)
    if not isinstance(c.split_delta, bool):
        raise ConfigError(f"split_delta={c.split_delta!r} is not valid; it must be true or false")
    _at_least("recalibrate_every", c.recalibrate_every, 0)
    _at_least("calibration_prompts", c.calibration_prompts, 0)


def check_replay(c: StrategyConfig) -> None:
    """The replay fields (`training.replay`, our trainer only): the message names the field, the value and what
    is valid."""
    if not isinstance(c.replay, bool):
        raise ConfigError(f"strategy.replay={c.replay!r} must be true or false")
    age = c.replay_max_age
    if age is not None and (isinstance(age, bool) or not isinstance(age, int) or age < 1):
        raise ConfigError(
            f"strategy.replay_max_age={age!r} must be a whole number of steps >= 1 (a stored answer is at least one "
            "step old when it is replayed), or none for no age limit"
        )
    clip = c.replay_clip
    if isinstance(clip, bool) or not isinstance(clip, int | float) or not (math.isfinite(clip) and clip >= 1.0):
        raise ConfigError(
            f"strategy.replay_clip={clip!r} must be a finite number >= 1 (the cap of the truncated importance weight "
            "pi_old / pi_behaviour, pi_old the learner before the update; 2 is the usual truncated-IS cap)"
        )
