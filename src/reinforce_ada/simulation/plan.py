"""The planner: what a strategy costs and how often it yields no signal, per prompt pass rate.

For a prompt with pass rate p and binary rewards it reports
- `zero_signal`: probability the prompt gives no gradient (all trained advantages zero, or dropped);
- `expected_samples`: expected samples drawn for it in one step;
- `unresolved`: probability it hits the cap without meeting its exit rule (None where there is no exit rule).
Methods: `closed_form` (uniform, dynamic, est, seq-positive with k_pos=1: unresolved (1-p)^(R*M), expected samples
M * sum_{r<R} (1-p)^(r*M)); `exact_enumeration` (any seq rule: a dynamic programme over the number of correct
samples after each round -- exact, no sampling error); `monte_carlo` (runs the real strategy objects on a simulated
policy with frozen pass rates; used to cross-check the others).
Est assumes its pass-rate estimate equals the true p and allocates over the given rates as one step's batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from math import comb

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import allocate, allocation_weights, build_strategy
from reinforce_ada.sampling.strategies.seq import exit_holds
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt


@dataclass
class PlanRow:
    p: float
    zero_signal: float
    expected_samples: float
    unresolved: float | None
    method: str
    stderr: float | None = None
    """Monte-Carlo standard error of zero_signal (None for exact methods)."""


def check_rates(rates: Sequence[float]) -> np.ndarray:
    r = np.asarray(rates, dtype=float)
    if r.ndim != 1 or len(r) == 0:
        raise ConfigError("pass rates must be a non-empty list of numbers")
    for i, p in enumerate(r):
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"pass rate #{i} = {p} is outside [0, 1]")
    return r


def _uniform_zero(p: float, n: int) -> float:
    return 1.0 if n < 2 else p**n + (1 - p) ** n


def _seq_exact(p: float, c: StrategyConfig) -> PlanRow:
    k_pos, k_neg = c.resolved_k_pos, c.resolved_k_neg
    active = {0: 1.0}  # correct count -> probability of being still active with that count
    drawn, zero, expected = 0, 0.0, 0.0
    while active and drawn < c.max_samples:
        k = min(c.samples_per_round, c.max_samples - drawn)
        expected += k * sum(active.values())
        drawn += k
        nxt: dict[int, float] = {}
        for pos, mass in active.items():
            for j in range(k + 1):
                q = mass * comb(k, j) * p**j * (1 - p) ** (k - j)
                if q:
                    nxt[pos + j] = nxt.get(pos + j, 0.0) + q
        active = {}
        for pos, mass in nxt.items():
            if exit_holds(pos, drawn - pos, exit=c.exit, k_pos=k_pos, k_neg=k_neg):
                zero += mass if pos in (0, drawn) else 0.0
            else:
                active[pos] = mass
    unresolved = sum(active.values())
    if c.unresolved == "drop":
        zero += unresolved
    else:
        zero += sum(m for pos, m in active.items() if pos in (0, drawn))
    closed = c.exit == "positive" and k_pos == 1 and c.max_samples % c.samples_per_round == 0
    if closed:  # the textbook form, identical to the enumeration: a pool is uniform iff round 0 is all correct
        m, rounds = c.samples_per_round, c.max_samples // c.samples_per_round  # or every sample is wrong
        unresolved = (1 - p) ** (rounds * m)
        expected = m * sum((1 - p) ** (r * m) for r in range(rounds))
        zero = min(1.0, p**m + unresolved)
    if c.resolved_advantage == "group" and c.n < 2:
        zero = 1.0  # a kept group of one sample is its own baseline
    return PlanRow(p, float(zero), float(expected), float(unresolved), "closed_form" if closed else "exact_enumeration")


def plan(cfg: StrategyConfig, rates: Sequence[float]) -> list[PlanRow]:
    """Exact answers per pass rate (see the module docstring for which method applies)."""
    r = check_rates(rates)
    if cfg.name in ("uniform", "dynamic"):
        return [PlanRow(float(p), _uniform_zero(p, cfg.n), float(cfg.n), None, "closed_form") for p in r]
    if cfg.name == "est":
        budget = cfg.budget if cfg.budget is not None else 8 * len(r)
        counts = allocate(allocation_weights(r, cfg), budget, cfg.min_samples, cfg.max_samples)
        return [
            PlanRow(float(p), _uniform_zero(p, int(k)), float(k), None, "closed_form")
            for p, k in zip(r, counts, strict=True)
        ]
    return [_seq_exact(float(p), cfg) for p in r]


def plan_monte_carlo(cfg: StrategyConfig, rates: Sequence[float], *, reps: int = 2000, seed: int = 0) -> list[PlanRow]:
    """Run the real strategy `reps` times per pass rate on a frozen simulated policy."""
    r = check_rates(rates)
    if cfg.name == "est":
        return _est_monte_carlo(cfg, r, reps=reps, seed=seed)
    rows = []
    for i, p in enumerate(r):
        prompts = [Prompt(id=f"mc-{j}", text="") for j in range(reps)]
        engine = SimulatedPolicy(prompts, [p] * reps, SimConfig(lr=0.0, seed=seed + i))
        led = collect(build_strategy(cfg.replace(seed=seed + i)), engine, prompts).ledger
        z = led.no_signal_prompt_share
        unresolved = led.unresolved_prompts / reps if cfg.name == "seq" else None
        se = float(np.sqrt(z * (1 - z) / reps))
        rows.append(PlanRow(float(p), z, led.samples_generated / reps, unresolved, "monte_carlo", se))
    return rows


def _est_monte_carlo(cfg: StrategyConfig, r: np.ndarray, *, reps: int, seed: int) -> list[PlanRow]:
    """Est allocates over a batch: one batch holding `reps` copies of the listed rates, with an exact predictor."""
    prompts = [Prompt(id=f"mc-{i}-{j}", text="", meta={"p": float(p)}) for j in range(reps) for i, p in enumerate(r)]
    engine = SimulatedPolicy(prompts, [x.meta["p"] for x in prompts], SimConfig(lr=0.0, seed=seed))
    budget = cfg.budget * reps if cfg.budget is not None else None
    strategy = build_strategy(cfg.replace(seed=seed, budget=budget), predictor=lambda x: x.meta["p"])
    batch = collect(strategy, engine, prompts)
    rows = []
    for i, p in enumerate(r):
        mine = [g for g in batch.groups if g.prompt.id.startswith(f"mc-{i}-")]
        zero = float(np.mean([len(set(g.pool_rewards)) < 2 for g in mine]))
        drawn = float(np.mean([len(g.pool_rewards) for g in mine]))
        rows.append(PlanRow(float(p), zero, drawn, None, "monte_carlo", float(np.sqrt(zero * (1 - zero) / reps))))
    return rows


def totals(rows: Sequence[PlanRow]) -> dict[str, float]:
    """Per-step totals for a batch holding one prompt at each listed rate."""
    return {
        "prompts": len(rows),
        "expected_samples": float(sum(r.expected_samples for r in rows)),
        "expected_zero_signal_prompts": float(sum(r.zero_signal for r in rows)),
        "zero_signal_share": float(np.mean([r.zero_signal for r in rows])),
        "expected_unresolved_prompts": float(sum(r.unresolved or 0.0 for r in rows)),
    }


def rows_as_dicts(rows: Sequence[PlanRow]) -> list[dict]:
    return [asdict(r) for r in rows]
