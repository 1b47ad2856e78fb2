"""The planner: what a strategy costs and how often it yields no signal, per prompt pass rate.

For a prompt with pass rate p and binary rewards it reports
- `zero_signal`: probability the prompt gives no gradient (all trained advantages zero, or dropped, or not trained);
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
`given_selected` (MoPPS: its choice depends on the whole candidate pool, so rows are the base sampler's given that
the prompt is chosen; `simulate` measures the selection); `monte_carlo` (runs the real strategy objects on a simulated
policy with frozen pass rates; used to cross-check the others).
Est and knapsack assume their pass-rate estimate equals the true p and allocate over the given rates as one step's
batch; `estimator=oracle` is that assumption made true (seq's give_up then starts from the oracle's Beta on p).
Which method applies is the strategy class's declared `traits.planner` (`sampling.traits`); a strategy
that declares `monte_carlo` is planned by running it (`MONTE_CARLO_REPS` visits per rate).

Sizes are checked before anything is allocated (issue 21): `max_samples` is at most `MAX_PLAN_SAMPLES` (the exact
methods weigh binomial laws with integer coefficients, which overflow a float past about 1,029 draws; knapsack
allocates a row of max_samples gains per prompt; and the seq enumeration runs max_samples / samples_per_round
rounds, forever in effect at max_samples 10**9 and p near 0). At the cap the slowest seq enumeration measured (give_up
with k_pos = k_neg = 400) takes about 15 s per rate. Monte Carlo needs `reps >= 1`, and the command line refuses reps
whose samples would not fit in memory (`MC_BYTES_PER_SAMPLE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from math import comb

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.memory import oracle_prior
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy, strategy_class
from reinforce_ada.sampling.strategies.select import Greso
from reinforce_ada.sampling.strategies.seq import exit_holds, resolve_chance
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt

MONTE_CARLO_REPS = 2000
"""Visits per rate when a strategy has no closed form (planner="monte_carlo")."""
MAX_PLAN_SAMPLES = 1024
"""Largest max_samples the planner answers for (module docstring); the paper's caps are 32 to 256."""
MC_BYTES_PER_SAMPLE = 600
"""Memory one simulated sample takes while `plan_monte_carlo` holds a batch (about 440 B measured, with margin)."""


@dataclass
class PlanRow:
    p: float
    zero_signal: float
    expected_samples: float
    unresolved: float | None
    method: str
    stderr: float | None = None
    """Monte-Carlo standard error of zero_signal (None for exact methods)."""
    skipped: float | None = None
    """GRESO: long-run share of the prompt's offers skipped before any rollout."""
    evicted: float | None = None
    """Eviction: probability that one visit evicts the prompt for good."""


@dataclass
class _Visit:
    """One visit's law: the plan row plus the chance its pool is all correct / all wrong (GRESO's streak moves)."""

    row: PlanRow
    all_correct: float
    all_wrong: float


def check_size(cfg: StrategyConfig) -> None:
    """Refuse a max_samples the planner cannot answer for (`MAX_PLAN_SAMPLES`, module docstring)."""
    if cfg.max_samples > MAX_PLAN_SAMPLES:
        raise ConfigError(
            f"max_samples={cfg.max_samples} is past the planner's limit: its binomial laws overflow a float past "
            f"about 1,029 draws; the largest allowed value is {MAX_PLAN_SAMPLES}"
        )


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


def _one_batch(p: float, n: int, method: str = "closed_form") -> _Visit:
    return _Visit(PlanRow(p, _uniform_zero(p, n), float(n), None, method), p**n, (1 - p) ** n)


def _binom(k: int, p: float) -> list[float]:
    return [comb(k, j) * p**j * (1 - p) ** (k - j) for j in range(k + 1)]


def _seq_exact(p: float, c: StrategyConfig) -> _Visit:
    k_pos, k_neg = c.resolved_k_pos, c.resolved_k_neg
    # give_up's prior on a first visit; estimator=oracle knows p (the memory's Beta concentrated on it)
    a0, b0 = oracle_prior(p) if c.estimator == "oracle" else (c.prior_alpha, c.prior_beta)
    active = {0: 1.0}  # correct count -> probability of being still active with that count
    ended: dict[tuple[int, int], float] = {}  # unresolved pools (cap or given up): (correct, drawn) -> probability
    drawn, zero, expected, right, wrong = 0, 0.0, 0.0, 0.0, 0.0
    while active:
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
                right += mass if pos == drawn else 0.0
                wrong += mass if pos == 0 else 0.0
            elif drawn >= c.max_samples or (
                c.give_up > 0
                and resolve_chance(pos, drawn - pos, c.max_samples - drawn, a0, b0, k_pos=k_pos, k_neg=k_neg)
                < c.give_up
            ):
                ended[pos, drawn] = ended.get((pos, drawn), 0.0) + mass
            else:
                active[pos] = mass
    unresolved = sum(ended.values())
    for (pos, n), m in ended.items():
        right += m if pos == n else 0.0
        wrong += m if pos == 0 else 0.0
        if c.unresolved == "drop" or pos in (0, n):
            zero += m
    closed = c.exit == "positive" and k_pos == 1 and c.max_samples % c.samples_per_round == 0 and c.give_up == 0
    if closed:  # the textbook form, identical to the enumeration: a pool is uniform iff round 0 is all correct
        m, rounds = c.samples_per_round, c.max_samples // c.samples_per_round  # or every sample is wrong
        unresolved = (1 - p) ** (rounds * m)
        expected = m * sum((1 - p) ** (r * m) for r in range(rounds))
        zero = min(1.0, p**m + unresolved)
    if c.resolved_advantage in ("group", "maxrl") and c.n < 2:
        zero = 1.0  # a kept group of one sample is its own baseline
    method = "closed_form" if closed else "exact_enumeration"
    return _Visit(PlanRow(p, float(zero), float(expected), float(unresolved), method), right, wrong)


def _pilot_commit(p: float, c: StrategyConfig) -> _Visit:
    k, extra, evict = c.pilot, c.max_samples - c.pilot, c.resolved_evict
    zero = right = wrong = committed = evicted = 0.0
    more = _binom(extra, p)  # the commit batch's correct count (a single 1.0 when there is none)
    for x, px in enumerate(_binom(k, p)):
        if c.commit_lo <= x / k <= c.commit_hi:  # committed: trained on pilot + commit, uniform only if both are
            committed += px
            right += px * more[-1] if x == k else 0.0
            wrong += px * more[0] if x == 0 else 0.0
            if evict is not None:
                evicted += px * sum(py for y, py in enumerate(more) if (x + y) / c.max_samples >= evict)
        else:  # deferred or too easy: not trained
            zero += px
            right += px if x == k else 0.0
            wrong += px if x == 0 else 0.0
            evicted += px if evict is not None and x / k >= evict else 0.0
    zero += sum(
        px * (more[-1] if x == k else more[0])
        for x, px in enumerate(_binom(k, p))
        if x in (0, k) and c.commit_lo <= x / k <= c.commit_hi
    )
    row = PlanRow(p, float(zero), k + committed * extra, None, "closed_form")
    row.evicted = float(evicted) if evict is not None else None
    return _Visit(row, right, wrong)


def _visits(cfg: StrategyConfig, r: np.ndarray) -> list[_Visit] | None:
    """The base sampler's law for one visit at each rate (no selection), by the class's declared planner; None for
    planner="monte_carlo" (no closed form)."""
    cls = strategy_class(cfg.name)
    planner = cls.traits.planner
    if planner == "group":
        return [_one_batch(float(p), cfg.n) for p in r]
    if planner == "allocation":
        budget = cfg.budget if cfg.budget is not None else 8 * len(r)
        counts = cls.plan_counts(r, cfg, budget)
        return [_one_batch(float(p), int(k)) for p, k in zip(r, counts, strict=True)]
    if planner == "pilot":
        return [_pilot_commit(float(p), cfg) for p in r]
    if planner == "sequential":
        return [_seq_exact(float(p), cfg) for p in r]
    return None


def greso_skip_share(all_correct: float, all_wrong: float, *, p_easy: float = 0.5, p_hard: float = 0.5) -> float:
    """Long-run share of a prompt's offers that GRESO skips, with fixed exploration probabilities.

    The state is the zero-variance streak s (+c: c all-correct visits in a row, -c: all wrong, 0: the last visit
    had both); an offer keeps the prompt with probability max(p^|s|, 0.01) and a kept visit moves s by the visit's
    outcome. Streaks beyond the floor behave alike, so they are merged.
    """
    depth = 1
    while max(p_easy, p_hard) ** depth > Greso.FLOOR:
        depth += 1
    states = list(range(-depth, depth + 1))
    at = {s: i for i, s in enumerate(states)}

    def keep(s: int) -> float:
        return 1.0 if s == 0 else max((p_easy if s > 0 else p_hard) ** abs(s), Greso.FLOOR)

    mixed = 1.0 - all_correct - all_wrong
    t_SS = np.zeros((len(states), len(states)))
    for s in states:
        kp = keep(s)
        t_SS[at[s], at[s]] += 1 - kp
        t_SS[at[s], at[min(s + 1, depth) if s > 0 else 1]] += kp * all_correct
        t_SS[at[s], at[max(s - 1, -depth) if s < 0 else -1]] += kp * all_wrong
        t_SS[at[s], at[0]] += kp * mixed
    # stationary distribution: pi (T - I) = 0, sum pi = 1
    a = np.vstack([(t_SS - np.eye(len(states))).T, np.ones(len(states))])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(len(states)), 1.0], rcond=None)[0]
    return float(1.0 - sum(pi[at[s]] * keep(s) for s in states))


def plan(cfg: StrategyConfig, rates: Sequence[float]) -> list[PlanRow]:
    """Exact answers per pass rate (see the module docstring for which method applies)."""
    check_size(cfg)
    r = check_rates(rates)
    visits = _visits(cfg, r)
    if visits is None:  # no closed form: the strategy itself, run on a frozen simulated policy
        return plan_monte_carlo(cfg, r, reps=MONTE_CARLO_REPS)
    rows = []
    for v in visits:
        row = v.row
        if cfg.resolved_select == "greso":
            row.skipped = greso_skip_share(v.all_correct, v.all_wrong)
            row.expected_samples *= 1.0 - row.skipped
            row.method = "stationary_markov"
        elif cfg.resolved_select in ("mopps", "value"):
            row.method = "given_selected"
        rows.append(row)
    return rows


def plan_monte_carlo(cfg: StrategyConfig, rates: Sequence[float], *, reps: int = 2000, seed: int = 0) -> list[PlanRow]:
    """Run the real strategy `reps` times per pass rate on a frozen simulated policy."""
    if reps < 1:
        raise ConfigError(f"reps (--monte-carlo) must be >= 1, got {reps}")
    check_size(cfg)
    r = check_rates(rates)
    if cfg.resolved_select != "none":
        raise ConfigError(
            f"select={cfg.resolved_select!r}: its effect depends on the prompts' history and the candidate pool, not "
            "on one visit; use the exact plan (without --monte-carlo) or `reinforce-ada simulate`"
        )
    if strategy_class(cfg.name).traits.planner == "allocation":
        return _est_monte_carlo(cfg, r, reps=reps, seed=seed)
    rows = []
    for i, p in enumerate(r):
        prompts = [Prompt(id=f"mc-{j}", text="") for j in range(reps)]
        engine = SimulatedPolicy(prompts, [p] * reps, SimConfig(lr=0.0, seed=seed + i))
        strategy = build_strategy(cfg.replace(seed=seed + i))
        if cfg.estimator == "oracle":  # the frozen policy's true rate
            strategy.memory.attach_oracle(engine.oracle())
        led = collect(strategy, engine, prompts).ledger
        z = led.no_signal_prompt_share
        unresolved = led.unresolved_prompts / reps if strategy_class(cfg.name).traits.planner == "sequential" else None
        se = float(np.sqrt(z * (1 - z) / reps))
        rows.append(PlanRow(float(p), z, led.samples_generated / reps, unresolved, "monte_carlo", se))
    return rows


def _est_monte_carlo(cfg: StrategyConfig, r: np.ndarray, *, reps: int, seed: int) -> list[PlanRow]:
    """Est and knapsack allocate over a batch: one batch holding `reps` copies of the listed rates, with an exact
    predictor."""
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
