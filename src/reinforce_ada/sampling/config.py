"""Strategy configuration: one frozen dataclass, one vocabulary.

The option names are the same everywhere: config fields, CLI flags (`--samples-per-round`), arm specs
(`seq:exit=positive`), metrics and docs.
Defaults are the paper's experiments (Ada-Seq-balance: M=8, N_max=32, n=4, K_pos=K_neg=n/2, global mean baseline,
no std); where the paper and the official code disagree the field's help says so. The allocators beyond the paper
(pilot_commit, knapsack, greso, mopps, seq's give_up, the learned predictor) default to their own papers' settings
where our shared fields allow it; docs/allocators.md lists each one's defaults and departures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.validate import (  # noqa: F401  (the vocabulary, re-exported)
    ALLOCATIONS,
    CONFORMAL_SCORES,
    ESTIMATORS,
    EXITS,
    RESIDUALS,
    SELECTIONS,
    SELECTS,
    UNRESOLVED,
    _traits,
    parse_budget_grid,
    strategy_names,
    validate,
)


def _f(default: Any, help: str, *, plan: bool = True) -> Any:
    """A field with its help; `plan=False` marks a field that never changes how many samples a visit draws or
    whether it has signal (downsampling, baselines, weights, cross-step trackers): `plan` offers no flag for it."""
    return field(default=default, metadata={"help": help, "plan": plan})


@dataclass(frozen=True)
class StrategyConfig:
    name: str = _f(
        "seq",
        "sampling strategy: a registered name (uniform, dynamic, seq, est, pilot_commit, knapsack, greso, mopps, "
        "conformal, auto = the recommended one, today uniform, and any registered with register_strategy)",
    )
    n: int = _f(4, "group size trained on per prompt (uniform/dynamic: samples per prompt)")
    samples_per_round: int = _f(8, "seq: samples drawn per active prompt per round (M)")
    max_samples: int = _f(32, "seq/est/knapsack/pilot_commit: cap on samples per prompt per step (N_max)")
    exit: str = _f(
        "balanced", "seq exit rule: positive (>= k_pos correct) or balanced (>= k_pos correct and >= k_neg wrong)"
    )
    k_pos: int | None = _f(
        None, "seq: correct samples needed to retire (default: n//2 balanced, 1 positive as in the official code)"
    )
    k_neg: int | None = _f(None, "seq balanced: wrong samples needed to retire (default: n - n//2)")
    threshold: float = _f(0.5, "a sample is correct iff reward > threshold (the official code used 0.7)")
    selection: str = _f(
        "random", "seq downsampling: random (seeded) or earliest (arrival order, as the official code)", plan=False
    )
    unresolved: str = _f("keep", "seq prompts that hit the cap unresolved: keep (official) or drop (no loss dilution)")
    budget: int | None = _f(None, "est/knapsack: total samples per step (default 8 per prompt, the paper's setting)")
    min_samples: int = _f(4, "est/knapsack: lower clip on samples per prompt (N_min; knapsack paper 2)")
    allocation: str = _f(
        "inv_sqrt",
        f"est allocation rule: one of {', '.join(ALLOCATIONS)} (remainder: the authors' released Ada-Est -- "
        "min_samples each, the rest split in proportion to the objective's weight f'(p_hat), largest remainders; "
        "signal: maximise the expected number of prompts with signal, sum 1 - p^N - (1-p)^N, exactly)",
    )
    residual: str = _f(
        "inv_sqrt", "est residual per-prompt weight: inv_sqrt (1/sqrt(p_hat+eps), the paper's) or none", plan=False
    )
    prior_alpha: float = _f(1.0, "est pass-rate tracker: Beta prior alpha")
    prior_beta: float = _f(1.0, "est pass-rate tracker: Beta prior beta")
    decay: float = _f(
        0.9, "est pass-rate tracker: exponential decay of past counts per visit (lambda in (0, 1])", plan=False
    )
    objective: str = _f("log", "objective f for allocation=objective and the optional correction: linear, log, power")
    alpha: float = _f(0.5, "exponent of the power objective")
    max_gen_batches: int = _f(
        3,
        "dynamic: most generation batches per step before training on a partial batch (pilot_commit: candidate "
        "prompts per step <= this x batch size)",
    )
    variance_tol: float = _f(1e-8, "dynamic: a group with reward variance <= tol is dropped", plan=False)
    advantage: str | None = _f(
        None,
        "baseline: group (GRPO), global (whole pool), maxrl (MaxRL's (r - mean) / mean over the group) or corrected "
        "(the HM fork's stratified-downsampling correction); default "
        "global for seq/est, group for the others",
        plan=False,
    )
    scale_std: bool | None = _f(
        None, "divide advantages by the std; default off for seq/est (official), on for the others (GRPO)", plan=False
    )
    correction: str = _f(
        "none", "explicit per-prompt weight f'(p_hat) from the pool (paper v3 §3.2): none or objective", plan=False
    )
    eps: float = _f(1e-3, "floor added to p_hat in 1/sqrt(p_hat + eps) allocation and weights")
    # -- select=value (sampling.value) --
    select_explore: float = _f(
        0.0,
        "select=value: share of candidates valued at a Thompson draw from their pass-rate posterior instead of the "
        "posterior expectation (0: greedy on expected signal per token; 1: every candidate Thompson-sampled); "
        "select=value reads `candidates` as mopps does",
        plan=False,
    )
    forget: float = _f(
        1.0,
        "prompt memory: a prompt's counts are read discounted by forget^(steps since its last visit), so an old "
        "belief widens back toward the prior as the policy moves on (1 = off, every paper's rule; ours, for "
        "select=value and mopps on pools visited rarely)",
        plan=False,
    )
    seed: int = _f(0, "seed of the strategy's own generator (downsampling)")
    estimator: str = _f(
        "tracker",
        "where a prompt's pass-rate estimate comes from (est allocation, seq give_up, mopps, select=value): tracker "
        "(Beta-prior EMA of its own visits), predictor (learned from prompt features over all prompts) or both (the "
        "predictor is the tracker's prior, strength prior_alpha + prior_beta) or oracle (the exact pass rate under the "
        "current policy, free of budget: a benchmark ceiling, our trainer on exact-answer tasks and the simulator "
        "only)",
    )
    predictor_lr: float = _f(
        0.2, "difficulty predictor: step size of its damped Fisher-scoring update per visit", plan=False
    )
    predictor_dim: int = _f(
        4096, "difficulty predictor: hashed character-trigram buckets of the prompt text (0: none)", plan=False
    )
    knapsack_value: str = _f(
        "total",
        "knapsack (and est allocation=knapsack): total (the paper's objective, sum of each prompt's value) or "
        "reference (the released code's DP: a prompt given nothing beyond min_samples scores 0)",
    )
    knapsack_estimate: str = _f(
        "recent",
        "knapsack p_hat: recent (mean of the last `history` outcomes, the paper) or last_visit (the released code: the "
        "latest visit alone once it has >= history samples)",
        plan=False,
    )
    history: int = _f(
        16, "knapsack: recent rewards remembered per prompt (paper 16); an estimate needs half of them", plan=False
    )
    give_up: float = _f(
        0.0,
        "seq: stop sampling a prompt once its posterior chance of meeting the exit rule within max_samples falls "
        "below this (0 = off, the paper)",
    )
    pilot: int = _f(8, "pilot_commit: pilot samples per prompt (paper 32 of 128: a quarter of max_samples)")
    commit_lo: float = _f(0.125, "pilot_commit: commit when the pilot pass rate is >= commit_lo (paper 0.125)")
    commit_hi: float = _f(0.75, "pilot_commit: ... and <= commit_hi (paper 1 - 0.25)")
    evict: float | None = _f(
        None,
        "skip in every later step a prompt whose pass rate on a visit was >= evict (default: 1.0 for pilot_commit, "
        "as its code; off for the others; a value > 1 turns it off)",
        plan=False,
    )
    select: str | None = _f(
        None,
        "prompt selection before any rollout, on top of any strategy: none, greso, mopps, value (the candidates "
        "with the most expected signal per generated token, from the planner's law) or iw (k of candidates x k drawn "
        "with inclusion probability from sqrt(E[P(signal)]), Horvitz-Thompson weights; ours); default greso for "
        "name=greso, mopps for name=mopps, none otherwise",
    )
    zero_variance_target: float = _f(
        0.25, "greso: target zero-variance share of sampled prompts; the skip probabilities adapt toward it"
    )
    target: float = _f(
        0.5, "mopps: target pass rate; prompts whose sampled posterior lies nearest are chosen", plan=False
    )
    candidates: int = _f(
        16, "mopps, select=value and select=iw: candidate prompts considered per prompt trained (paper 16)", plan=False
    )
    budget_grid: str = _f(
        "2/4/8/16/32",
        "conformal: ascending per-prompt budgets, '/'-separated; a prompt stops at the first whose conformal set is "
        "a singleton (trl-cgrpo 0.2.0 budget_grid, default 2,4,8,16,32; budgets above max_samples are dropped)",
    )
    conformal_score: str = _f(
        "first_success",
        "conformal nonconformity score on pass/fail outcomes: first_success (j*/k, position of the first correct "
        "sample) or pass_rate (1 - correct/k), trl-cgrpo's verifier scores (its answer-string 'aps' needs extracted "
        "answers, which the sampling layer never sees)",
    )
    conformal_delta: float | None = _f(
        None,
        "conformal miscoverage level delta in (0, 1); default (trl-cgrpo's delta=None): at each calibration, "
        "(1 - solve rate within the largest budget) + delta_margin, clipped to [0.05, 0.95]",
    )
    delta_margin: float = _f(
        0.05, "conformal: margin added to the miss rate when conformal_delta is unset (trl-cgrpo 0.05)"
    )
    split_delta: bool = _f(
        False, "conformal: choose delta on the first half of the calibration set, thresholds on the second (trl-cgrpo)"
    )
    recalibrate_every: int = _f(
        50, "conformal: refit the thresholds every this many steps (trl-cgrpo 50); 0 calibrates once, at the first step"
    )
    calibration_prompts: int = _f(
        200,
        "conformal: prompts per calibration, drawn from the prompt source, sampled max(budget_grid) times each and "
        "not trained on (trl-cgrpo: its whole held-out calibration set; its README example holds 200)",
    )
    replay: bool = _f(
        False,
        "replay (AR3PO's response reuse, our trainer only): a trained group with no correct sample gets the prompt's "
        "most recent earlier correct completion in place of one wrong sample, off-policy corrected "
        "(training.replay, docs/replay.md)",
        plan=False,
    )
    replay_max_age: int | None = _f(
        None, "replay: use a stored answer only if generated at most this many steps ago (None: no limit)", plan=False
    )
    replay_clip: float = _f(
        2.0, "replay: truncate the replayed tokens' importance weight pi_old / pi_behaviour at this (>= 1)", plan=False
    )
    # -- select=iw (sampling.iw; ours): importance-weighted admission --
    iw_mix: float = _f(
        0.2,
        "select=iw (importance-weighted admission of k of candidates x k prompts, with inclusion probability from "
        "sqrt(E[P(signal)]) and Horvitz-Thompson weights; ours): share lam in [0, 1] of the uniform proposal in the "
        "defensive mixture (1 - lam) u / sum(u) + lam / (candidates x k); it bounds the weights by 1 / lam",
        plan=False,
    )
    iw_clip: float = _f(
        3.0, "select=iw: clip each Horvitz-Thompson weight at this (>= 1) before the self-normalisation", plan=False
    )
    iw_weights: bool = _f(
        True,
        "select=iw: multiply each admitted prompt's loss by its weight (false: the same draw, weights 1)",
        plan=False,
    )

    def __post_init__(self) -> None:
        if self.name == "auto":  # resolved once, here: a config (and its config.toml) names what actually runs
            from reinforce_ada.sampling.strategies import AUTO

            object.__setattr__(self, "name", AUTO)
        validate(self)

    @property
    def resolved_advantage(self) -> str:
        if self.advantage is not None:
            return self.advantage
        return _traits(self.name).baseline

    @property
    def resolved_scale_std(self) -> bool:
        if self.scale_std is not None:
            return self.scale_std
        return _traits(self.name).baseline == "group"

    @property
    def resolved_select(self) -> str:
        if self.select is not None:
            return self.select
        return _traits(self.name).default_select

    @property
    def resolved_evict(self) -> float | None:
        """The eviction threshold in force, or None when eviction is off."""
        if self.evict is None:
            return _traits(self.name).default_evict
        return self.evict if self.evict <= 1.0 else None

    @property
    def resolved_k_pos(self) -> int:
        if self.k_pos is not None:
            return self.k_pos
        return self.n // 2 if self.exit == "balanced" else 1

    @property
    def resolved_k_neg(self) -> int:
        if self.exit == "positive":
            return 0
        return self.k_neg if self.k_neg is not None else self.n - self.n // 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> StrategyConfig:
        return replace(self, **changes)


def strategy_fields() -> list[tuple[str, Any, str]]:
    """(name, default, help) for every field: the CLI builds its flags from this."""
    return [(f.name, f.default, f.metadata.get("help", "")) for f in fields(StrategyConfig)]


def coerce_value(where: str, value: Any, typ: str) -> Any:
    """Check and convert a TOML, CLI or arm-spec value against a config field's declared type (a string such as
    `int | None`); the error names `where` and the type."""
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null") and "None" in typ):
        if "None" not in typ:
            raise ConfigError(f"{where} cannot be empty; expected {typ}")
        return None
    base = typ.split("|")[0].strip()
    try:
        if base == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if base == "float":
            return float(value)
        if base.startswith("tuple"):
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(float(x) for x in items)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}={value!r} is not a valid {typ}") from None


def parse_arm(spec: str, base: StrategyConfig | None = None) -> StrategyConfig:
    """`seq`, `seq:exit=positive`, `uniform:n=16,scale_std=false` -> a StrategyConfig built on `base`."""
    base = base or StrategyConfig()
    name, _, opts = spec.strip().partition(":")
    types = {f.name: str(f.type) for f in fields(StrategyConfig)}
    changes: dict[str, Any] = {"name": name}
    for kv in filter(None, opts.split(",")):
        key, eq, raw = kv.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in types:
            raise ConfigError(f"bad option {kv!r} in arm {spec!r}; use key=value with key in {sorted(types)}")
        changes[key] = coerce_value(key, raw.strip(), types[key])
    return base.replace(**changes)


def arm_label(cfg: StrategyConfig, base: StrategyConfig) -> str:
    """The shortest spec that `parse_arm` turns back into `cfg` on `base`."""
    diff = [f"{k}={v}" for k, v in asdict(cfg).items() if k != "name" and v != getattr(base, k)]
    return cfg.name + (":" + ",".join(diff) if diff else "")
