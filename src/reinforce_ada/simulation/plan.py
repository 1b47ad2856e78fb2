"""The planner: what a strategy costs and how often it yields no signal, per prompt pass rate.

For a prompt with pass rate p and binary rewards it reports
- `zero_signal`: probability the prompt gives no gradient (all trained advantages zero, or dropped, or not trained;
  counted before batch normalisation, as the ledger does). Under a baseline from the prompt's own samples (group,
  global, leave-one-out, MaxRL) a pool whose rewards all agree has none; under `advantage=tracker` (SPO's value from
  before the step) a trained prompt always has signal, so only dropped or untrained prompts count;
- `expected_samples`: expected samples drawn for it in one step;
- `unresolved`: probability it hits the cap without meeting its exit rule (None where there is no exit rule);
- `skipped` (GRESO) and `evicted` (eviction) where they apply.
Methods: `closed_form` (uniform, dynamic, est -- knapsack allocation included --, the knapsack strategy's allocation
and value, pilot_commit: pilot X ~ Bin(pilot, p), committed iff X / pilot is in the band, expected samples
pilot + P(commit) (max_samples - pilot), seq-positive with k_pos=1: unresolved (1-p)^(R*M), expected samples
M * sum_{r<R} (1-p)^(r*M)); `exact_enumeration` (any seq rule, give_up included: a dynamic programme over the number
of correct samples after each round -- exact, no sampling error; give_up uses a first visit's prior Beta(prior_alpha,
prior_beta)); `stationary_markov` (GRESO: the long-run share of offers skipped, from the Markov chain over the
prompt's zero-variance streak with the initial exploration probabilities 0.5 -- its expected samples are per offer);
`given_selected` (MoPPS, select=value and select=iw: the choice depends on the whole candidate pool, so rows are the
base sampler's given that the prompt is chosen; `simulate` measures the selection); `monte_carlo` (runs the real
strategy objects on a simulated policy with frozen pass rates; used to cross-check the others).
Est and knapsack assume their pass-rate estimate equals the true p and allocate over the given rates as one step's
batch; `estimator=oracle` is that assumption made true (seq's give_up then starts from the oracle's Beta on p).
Which method applies is the strategy class's declared `traits.planner` (`sampling.traits`); a strategy
that declares `monte_carlo` is planned by running it (`MONTE_CARLO_REPS` visits per rate).

Sizes are checked before anything is allocated: the most samples a visit can draw (`max_samples`, or `n`) is at
most `MAX_PLAN_SAMPLES` (the exact
methods weigh binomial laws with integer coefficients, which overflow a float past about 1,029 draws; knapsack
allocates a row of max_samples gains per prompt; and the seq enumeration runs max_samples / samples_per_round
rounds, forever in effect at max_samples 10**9 and p near 0). At the cap the slowest seq enumeration measured (give_up
with k_pos = k_neg = 400) takes about 15 s per rate. Monte Carlo needs `reps >= 1`, and the command line refuses reps
whose samples would not fit in memory (`MC_BYTES_PER_SAMPLE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission import greso_skip_share
from reinforce_ada.sampling.advantages import zero_advantage
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.law import (  # noqa: F401  (re-exported: the planner's public names)
    MAX_PLAN_SAMPLES,
    PlanRow,
    check_rates,
    check_size,
    visit_law,
)
from reinforce_ada.sampling.ledger import step_advantages
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy, strategy_class
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt

MONTE_CARLO_REPS = 2000
"""Visits per rate when a strategy has no closed form (planner="monte_carlo")."""
MC_BYTES_PER_SAMPLE = 600
"""Memory one simulated sample takes while `plan_monte_carlo` holds a batch (about 440 B measured, with margin)."""


def plan(cfg: StrategyConfig, rates: Sequence[float]) -> list[PlanRow]:
    """What strategy `cfg` does with a prompt of each pass rate in `rates`, exactly (no sampling).

    One `PlanRow` per rate: the probability the prompt gives no gradient (all trained advantages zero, dropped or
    not trained), the expected samples it draws, and how often it ends unresolved; closed forms or exact enumeration
    over the strategy's law of one visit, whichever its class declares (module docstring). `plan_monte_carlo` checks
    it by running the real strategy. Raises ConfigError for a strategy without a planner or a cap too large to
    enumerate.
    """
    cls = strategy_class(cfg.name)
    check_size(cls, cfg.options)
    r = check_rates(rates)
    visits = visit_law(cls, cfg.options, r)
    if visits is None:  # no closed form: the strategy itself, run on a frozen simulated policy
        return plan_monte_carlo(cfg, r, reps=MONTE_CARLO_REPS)
    rows = []
    for v in visits:
        row = v.row
        if cfg.options.select == "greso":
            row.skipped = greso_skip_share(v.all_correct, v.all_wrong)
            row.expected_samples *= 1.0 - row.skipped
            row.method = "stationary_markov"
        elif cfg.options.select != "none":
            row.method = "given_selected"
        rows.append(row)
    return rows


def plan_monte_carlo(cfg: StrategyConfig, rates: Sequence[float], *, reps: int = 2000, seed: int = 0) -> list[PlanRow]:
    """Run the real strategy `reps` times per pass rate on a frozen simulated policy."""
    if reps < 1:
        raise ConfigError(f"reps (--monte-carlo) must be >= 1, got {reps}")
    cls = strategy_class(cfg.name)
    check_size(cls, cfg.options)
    r = check_rates(rates)
    if cfg.options.select != "none":
        raise ConfigError(
            f"select={cfg.options.select!r}: its effect depends on the prompts' history and the candidate pool, not "
            "on one visit; use the exact plan (without --monte-carlo) or `reinforce-ada simulate`"
        )
    if cls.traits.planner == "allocation":
        return _est_monte_carlo(cfg, r, reps=reps, seed=seed)
    rows = []
    for i, p in enumerate(r):
        prompts = [Prompt(id=f"mc-{j}", text="") for j in range(reps)]
        engine = SimulatedPolicy(prompts, [p] * reps, SimConfig(lr=0.0, seed=seed + i))
        strategy = build_strategy(cfg.replace(seed=seed + i))
        if cfg.options.estimator == "oracle":  # the frozen policy's true rate
            strategy.attach(oracle=engine.oracle())
        led = collect(strategy, engine, prompts, more_prompts=lambda k: []).ledger  # the listed rates only
        z = led.no_signal_prompt_share
        unresolved = led.unresolved_prompts / reps if cls.traits.planner == "sequential" else None
        se = float(np.sqrt(z * (1 - z) / reps))
        rows.append(PlanRow(float(p), z, led.samples_generated / reps, unresolved, "monte_carlo", se))
    return rows


def _est_monte_carlo(cfg: StrategyConfig, r: np.ndarray, *, reps: int, seed: int) -> list[PlanRow]:
    """Est and knapsack allocate over a batch: one batch holding `reps` copies of the listed rates, with an exact
    predictor."""
    prompts = [Prompt(id=f"mc-{i}-{j}", text="", meta={"p": float(p)}) for j in range(reps) for i, p in enumerate(r)]
    engine = SimulatedPolicy(prompts, [x.meta["p"] for x in prompts], SimConfig(lr=0.0, seed=seed))
    budget = cfg.options.budget * reps if cfg.options.budget is not None else None
    strategy = build_strategy(cfg.replace(seed=seed, budget=budget), predictor=lambda x: x.meta["p"])
    batch = collect(strategy, engine, prompts, more_prompts=lambda k: [])  # the listed rates only
    advs, _ = step_advantages(strategy.opts, batch.groups)  # signal as the ledger counts it, under the arm's baseline
    silent = {g.prompt.id: zero_advantage(a) for g, a in zip(batch.groups, advs, strict=True)}
    rows = []
    for i, p in enumerate(r):
        mine = [g for g in batch.groups if g.prompt.id.startswith(f"mc-{i}-")]
        zero = float(np.mean([silent[g.prompt.id] for g in mine]))
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
