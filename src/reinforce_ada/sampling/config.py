"""Strategy configuration: one frozen dataclass, one vocabulary.

The option names are the same everywhere: config fields, CLI flags (`--samples-per-round`), arm specs
(`seq:exit=positive`), metrics and docs.
Defaults are the paper's experiments (Ada-Seq-balance: M=8, N_max=32, n=4, K_pos=K_neg=n/2, global mean baseline,
no std); where the paper and the official code disagree the field's help says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from reinforce_ada.errors import ConfigError

STRATEGY_NAMES = ("uniform", "dynamic", "seq", "est")
EXITS = ("positive", "balanced")
SELECTIONS = ("random", "earliest")
UNRESOLVED = ("keep", "drop")
ALLOCATIONS = ("inv_sqrt", "variance", "objective")
RESIDUALS = ("inv_sqrt", "none")


def _f(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class StrategyConfig:
    name: str = _f("seq", f"sampling strategy: one of {', '.join(STRATEGY_NAMES)}")
    n: int = _f(4, "group size trained on per prompt (uniform/dynamic: samples per prompt)")
    samples_per_round: int = _f(8, "seq: samples drawn per active prompt per round (M)")
    max_samples: int = _f(32, "seq/est: cap on samples per prompt per step (N_max)")
    exit: str = _f(
        "balanced", "seq exit rule: positive (>= k_pos correct) or balanced (>= k_pos correct and >= k_neg wrong)"
    )
    k_pos: int | None = _f(
        None, "seq: correct samples needed to retire (default: n//2 balanced, 1 positive as in the official code)"
    )
    k_neg: int | None = _f(None, "seq balanced: wrong samples needed to retire (default: n - n//2)")
    threshold: float = _f(0.5, "a sample is correct iff reward > threshold (the official code used 0.7)")
    selection: str = _f("random", "seq downsampling: random (seeded) or earliest (arrival order, as the official code)")
    unresolved: str = _f("keep", "seq prompts that hit the cap unresolved: keep (official) or drop (no loss dilution)")
    budget: int | None = _f(None, "est: total samples per step (default 8 per prompt, the paper's setting)")
    min_samples: int = _f(4, "est: lower clip on samples per prompt (N_min)")
    allocation: str = _f("inv_sqrt", f"est allocation rule: one of {', '.join(ALLOCATIONS)}")
    residual: str = _f("inv_sqrt", "est residual per-prompt weight: inv_sqrt (1/sqrt(p_hat+eps), the paper's) or none")
    prior_alpha: float = _f(1.0, "est pass-rate tracker: Beta prior alpha")
    prior_beta: float = _f(1.0, "est pass-rate tracker: Beta prior beta")
    decay: float = _f(0.9, "est pass-rate tracker: exponential decay of past counts per visit (lambda in (0, 1])")
    objective: str = _f("log", "objective f for allocation=objective and the optional correction: linear, log, power")
    alpha: float = _f(0.5, "exponent of the power objective")
    max_gen_batches: int = _f(3, "dynamic: most generation batches per step before training on a partial batch")
    variance_tol: float = _f(1e-8, "dynamic: a group with reward variance <= tol is dropped")
    advantage: str | None = _f(
        None, "baseline: group (GRPO) or global (whole pool); default group for uniform/dynamic, global for seq/est"
    )
    scale_std: bool | None = _f(
        None, "divide advantages by the std; default on for uniform/dynamic (GRPO), off for seq/est (official)"
    )
    correction: str = _f(
        "none", "explicit per-prompt weight f'(p_hat) from the pool (paper v3 §3.2): none or objective"
    )
    eps: float = _f(1e-3, "floor added to p_hat in 1/sqrt(p_hat + eps) allocation and weights")
    seed: int = _f(0, "seed of the strategy's own generator (downsampling)")

    def __post_init__(self) -> None:
        validate(self)

    @property
    def resolved_advantage(self) -> str:
        if self.advantage is not None:
            return self.advantage
        return "group" if self.name in ("uniform", "dynamic") else "global"

    @property
    def resolved_scale_std(self) -> bool:
        if self.scale_std is not None:
            return self.scale_std
        return self.name in ("uniform", "dynamic")

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


def validate(c: StrategyConfig) -> None:
    """Check every field; the message names the field and the valid range."""
    _choice("name", c.name, STRATEGY_NAMES)
    _choice("exit", c.exit, EXITS)
    _choice("selection", c.selection, SELECTIONS)
    _choice("unresolved", c.unresolved, UNRESOLVED)
    _choice("allocation", c.allocation, ALLOCATIONS)
    _choice("residual", c.residual, RESIDUALS)
    from reinforce_ada.sampling.objectives import OBJECTIVES

    _choice("objective", c.objective, tuple(OBJECTIVES))
    if c.advantage is not None:
        _choice("advantage", c.advantage, ("group", "global"))
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
    if c.resolved_k_pos + c.resolved_k_neg > c.max_samples:
        raise ConfigError(
            f"k_pos + k_neg = {c.resolved_k_pos + c.resolved_k_neg} exceeds max_samples={c.max_samples}: "
            "no prompt could ever retire"
        )
    if c.budget is not None:
        _at_least("budget", c.budget, 0)
    if not 0.0 < c.decay <= 1.0:
        raise ConfigError(f"decay={c.decay} is out of range; it must be in (0, 1]")
    for name in ("prior_alpha", "prior_beta", "eps"):
        if not getattr(c, name) > 0:
            raise ConfigError(f"{name}={getattr(c, name)} is out of range; it must be > 0")
    if not 0.0 < c.alpha <= 1.0:
        raise ConfigError(f"alpha={c.alpha} is out of range; it must be in (0, 1]")
    _at_least("variance_tol", c.variance_tol, 0.0)


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
