"""How well does a belief know a prompt before its first sample? The draw `select=iw` makes, replayed on known rates.

The compute-to-target study found (its `iw` and `signal` registrations): on `mixed`, the same unweighted draw
reaches 1.43x GRPO-n2's tokens with the oracle's pass rates (`iw-noweight`) and 0.92x with the tracker + predictor's
(`signal-draw`). This replays that draw with the policy held
fixed, so the belief is the only thing that differs:
1) Each step, `candidates x k` prompts come from the pool in epoch order (`sampling.order.PromptOrder`, as the
   trainer offers them: a prompt not admitted waits for the next epoch); the strategy's own admission
   (`sampling.iw.iw_choose`, the arm's `StrategyConfig`, its `PromptMemory`) admits k of them, before the step begins
   (`memory.new_step`), as in training; each admitted prompt is visited with `n` samples drawn as Binomial(n, p) from
   its exact rate p and recorded like a trainer's visit (the tracker at once, the predictor at the next step's
   `new_step`, so the predictor admitting step t has learnt from visits up to step t - 2, as in training).
   Candidates, admission draws and outcomes have separate seeded generators, so every belief sees the same
   candidates in the same order.
2) The score of a step is the admitted prompts' mean exact P(signal) = 1 - p^n - (1 - p)^n (the share of groups that
   will carry a gradient), beside the same mean over all the step's candidates (what uniform admission gets in
   expectation). `gain_share` = (belief - uniform) / (oracle - uniform) over the same steps and seeds.
3) Also per step: the Spearman correlation between the belief's mean and the exact rate over the candidates.
What it leaves out: the policy learning (rates drift during a run; here they are the warm start's), and what the
admitted prompts are worth beyond having signal. It measures the belief, not the arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.iw import iw_choose
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.law import value_table
from reinforce_ada.sampling.memory import PassRateOracle, PromptMemory
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.strategies import strategy_class
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class BeliefRun:
    admitted_signal: np.ndarray
    """Per step: mean exact P(signal) of the admitted prompts."""
    candidate_signal: np.ndarray
    """Per step: the same mean over all the step's candidates (uniform admission's expectation)."""
    spearman: np.ndarray
    """Per step: rank correlation of the belief's mean with the exact rate over the candidates (NaN if constant)."""


def p_signal(p: np.ndarray, n: int) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    return 1.0 - p**n - (1.0 - p) ** n


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    for v in np.unique(x):  # average ranks for ties
        tie = x == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = _ranks(np.asarray(a, dtype=float)), _ranks(np.asarray(b, dtype=float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def replay_draw(
    prompts: Sequence[Prompt],
    rates: np.ndarray,
    cfg: StrategyConfig,
    *,
    steps: int,
    batch: int,
    n: int,
    seed: int,
    oracle_rates: np.ndarray | None = None,
) -> BeliefRun:
    """Replay `cfg`'s `select=iw` admission for `steps` steps of `batch` prompts on a pool with fixed exact `rates`
    (module docstring). `cfg.estimator="oracle"` reads `oracle_rates` (default: `rates` themselves), e.g. each
    level's mean rate for the best belief that knows only the level."""
    rates = np.asarray(rates, dtype=float)
    seen = rates if oracle_rates is None else np.asarray(oracle_rates, dtype=float)
    if seen.shape != rates.shape or not np.all((seen >= 0) & (seen <= 1)):
        raise ConfigError(f"oracle_rates must be {len(rates)} rates in [0, 1]")
    if len(prompts) != len(rates) or not len(prompts):
        raise ConfigError(f"need one rate per prompt and at least one prompt; got {len(prompts)} and {len(rates)}")
    if not np.all((rates >= 0) & (rates <= 1)):
        raise ConfigError("rates must lie in [0, 1]")
    if cfg.options.select != "iw":
        raise ConfigError(f"replay_draw replays select=iw; the config has select={cfg.options.select!r}")
    if steps < 1 or batch < 1 or n < 1:
        raise ConfigError(f"steps, batch and n must be >= 1; got {steps}, {batch}, {n}")
    n_cand = min(len(prompts), cfg.options.candidates * batch)
    index = {p.id: i for i, p in enumerate(prompts)}
    if len(index) != len(prompts):
        raise ConfigError("prompt ids must be unique")
    memory = PromptMemory(cfg.options)
    if cfg.options.estimator == "oracle":
        memory.attach(oracle=PassRateOracle(lambda ps: seen[[index[p.id] for p in ps]]))
    table = value_table(strategy_class(cfg.name), cfg.options)
    order = PromptOrder(prompts, seed=seed)
    draw_rng = np.random.default_rng([seed, 24])
    outcome_rng = np.random.default_rng([seed, 25])
    admitted, cand, rho = [], [], []
    for _ in range(steps):
        candidates = order.take(n_cand)
        idx = np.array([index[p.id] for p in candidates])
        chosen, _ = iw_choose(candidates, batch, memory, draw_rng, table, cfg.options)
        cand.append(float(p_signal(rates[idx], n).mean()))
        chosen_idx = np.array([index[p.id] for p in chosen])
        admitted.append(float(p_signal(rates[chosen_idx], n).mean()))
        rho.append(spearman(np.array([memory.estimate(p) for p in candidates]), rates[idx]))
        memory.new_step()  # as in training: admission reads the memory before the step begins
        for i in chosen_idx:
            k = int(outcome_rng.binomial(n, rates[i]))
            memory.record(prompts[i], [True] * k + [False] * (n - k))
    return BeliefRun(np.array(admitted), np.array(cand), np.array(rho))


def gain_share(belief: float, uniform: float, oracle: float) -> float:
    """(belief - uniform) / (oracle - uniform); NaN when the oracle gains nothing."""
    room = oracle - uniform
    return float((belief - uniform) / room) if room > 0 else float("nan")


def within_level_probe(
    x: np.ndarray,
    rates: np.ndarray,
    levels: Sequence[object],
    *,
    seed: int = 0,
    ridge: float = 1e-2,
    min_test: int = 20,
) -> dict[str, float]:
    """Is a feature's knowledge of the pass rate there at all, beyond the level? An offline reference, not a bound.

    Per level: a ridge regression of logit(rate) (rates clipped to [1e-3, 1 - 1e-3]) on `x` fitted on a random half
    of the level's prompts with their *exact* rates, and the Spearman correlation of its predictions with the exact
    rates on the other half. Returns each level's correlation (levels with fewer than `min_test` prompts in either
    half are left out) and `mean`, weighted by the test prompts. It learns from exact rates, which an online learner
    never sees (it gets a few Bernoulli draws per prompt); but it is one fixed, untuned ridge, so a tuned probe could
    find more where features outnumber a level's prompts."""
    x, rates = np.asarray(x, dtype=float), np.asarray(rates, dtype=float)
    if x.ndim != 2 or len(x) != len(rates) or len(levels) != len(rates):
        raise ConfigError(f"need one feature row and one level per rate; got {x.shape}, {len(levels)}, {len(rates)}")
    r = np.clip(rates, 1e-3, 1 - 1e-3)
    y = np.log(r / (1 - r))
    half = np.random.default_rng([seed, 31]).random(len(rates)) < 0.5
    lv = np.array([str(v) for v in levels])
    out: dict[str, float] = {}
    weights: list[tuple[float, int]] = []
    for level in sorted(set(lv.tolist())):
        fit, test = (lv == level) & half, (lv == level) & ~half
        if fit.sum() < min_test or test.sum() < min_test:
            continue
        a = np.hstack([x[fit], np.ones((fit.sum(), 1))])
        w = np.linalg.solve(a.T @ a + ridge * np.eye(a.shape[1]), a.T @ y[fit])
        rho = spearman(np.hstack([x[test], np.ones((test.sum(), 1))]) @ w, rates[test])
        out[f"L{level}"] = rho
        if np.isfinite(rho):
            weights.append((rho, int(test.sum())))
    total = sum(n for _, n in weights)
    out["mean"] = float(sum(rho * n for rho, n in weights) / total) if total else float("nan")
    return out
