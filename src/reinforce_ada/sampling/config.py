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

EXITS = ("positive", "balanced")
SELECTIONS = ("random", "earliest")
UNRESOLVED = ("keep", "drop")
ALLOCATIONS = ("inv_sqrt", "variance", "objective", "knapsack", "remainder", "signal")
RESIDUALS = ("inv_sqrt", "none")
SELECTS = ("none", "greso", "mopps", "value")
ESTIMATORS = ("tracker", "predictor", "both", "oracle")
"""Where a pass-rate estimate comes from (`sampling.memory`): the one list."""


def _traits(name: str):
    """The named strategy's traits (`sampling.traits`), from the registry: the only list of strategy names."""
    from reinforce_ada.sampling.strategies import strategy_class

    return strategy_class(name).traits


def strategy_names() -> tuple[str, ...]:
    from reinforce_ada.sampling.strategies import STRATEGIES

    return tuple(STRATEGIES)


def _f(default: Any, help: str, *, plan: bool = True) -> Any:
    """A field with its help; `plan=False` marks a field that never changes how many samples a visit draws or
    whether it has signal (downsampling, baselines, weights, cross-step trackers): `plan` offers no flag for it."""
    return field(default=default, metadata={"help": help, "plan": plan})


@dataclass(frozen=True)
class StrategyConfig:
    name: str = _f(
        "seq",
        "sampling strategy: a registered name (uniform, dynamic, seq, est, pilot_commit, knapsack, greso, mopps, and "
        "any registered with register_strategy)",
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
        "prompt selection before any rollout, on top of any strategy: none, greso, mopps or value (the candidates "
        "with the most expected signal per generated token, from the planner's law; default greso for name=greso, "
        "mopps for name=mopps, none otherwise)",
    )
    zero_variance_target: float = _f(
        0.25, "greso: target zero-variance share of sampled prompts; the skip probabilities adapt toward it"
    )
    target: float = _f(
        0.5, "mopps: target pass rate; prompts whose sampled posterior lies nearest are chosen", plan=False
    )
    candidates: int = _f(16, "mopps: candidate prompts considered per prompt trained (paper 16)", plan=False)
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

    def __post_init__(self) -> None:
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


def _choice(name: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid; choose one of {list(valid)}")


def _at_least(name: str, value: Any, lo: float) -> None:
    if value < lo:
        raise ConfigError(f"{name}={value!r} is out of range; it must be >= {lo}")


def _finite(c: StrategyConfig) -> None:
    """No float field may be NaN or infinite (`evict` aside: None or > 1 turns eviction off)."""
    import math

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


CONFORMAL_SCORES = ("first_success", "pass_rate")


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
