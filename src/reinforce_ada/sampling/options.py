"""Strategy options: each strategy owns a frozen dataclass of them; what several share is written once, here.

1) `Options` is the base of every strategy's options class (`Seq.Options`, `Uniform.Options`, ...). It holds what
   the protocol itself reads for any strategy, in three shared groups: the baseline and weights (`BaselineOptions`:
   what a step's groups teach), the prompt memory (`MemoryOptions`: the pass-rate belief across steps) and admission
   (`AdmissionOptions`: which offered prompts a strategy is handed, `sampling.admission`); plus `threshold` (what
   counts as correct) and `n` (the group size trained on, the integrations' group size).
2) A strategy's own options subclass `Options` and add fields (or override a shared default, e.g. Seq's baseline is
   the whole pool's mean); its `__post_init__` checks them after `super().__post_init__()`. An option is declared
   with `option(default, help, plan=...)`: the help is the CLI's, the TOML's and the docs'; `plan=False` marks an
   option that never changes how many samples a visit draws or whether it has signal (downsampling, std scaling,
   weights, cross-step trackers; not `advantage`: a group-of-n baseline has no signal where a tracker's has), so
   `reinforce-ada plan` offers no flag for it.
3) The names are one vocabulary: config field, CLI flag (`--k-pos`), arm spec (`seq:k_pos=2`), TOML key, metric.
   Two strategies that share a name share its type (the contract test checks it).
The checks an options class runs (`at_least`, `choice`, `unit`, ...) are in `sampling.checks`.
This module knows no strategy: the registry (`sampling.strategies`) maps names to classes and `sampling.configure`
builds a config from flat names.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import ADVANTAGES, BATCH_NORMS, CORRECTIONS
from reinforce_ada.sampling.checks import at_least, boolean, choice, fits_memory, of_type, positive, unit
from reinforce_ada.sampling.objectives import OBJECTIVES

ESTIMATORS = ("tracker", "predictor", "both", "level", "oracle")
"""Where a pass-rate estimate comes from (`sampling.memory`): the one list."""


def option(default: Any, help: str, *, plan: bool = True) -> Any:
    """A field of an options class, with its help (module docstring, 2)."""
    return field(default=default, metadata={"help": help, "plan": plan})


def same_as(base: type, name: str, default: Any) -> Any:
    """The option `name` of `base` with another default: a strategy's own default for a shared option (Seq's
    baseline is the whole pool's mean), with the shared help."""
    return field(default=default, metadata=base.__dataclass_fields__[name].metadata)


@dataclass(frozen=True)
class BaselineOptions:
    """What a step's groups teach: the baseline, and the per-prompt weights (`sampling.advantages`)."""

    advantage: str = option(
        "group",
        "baseline: group (GRPO: the kept group's mean), global (Reinforce-Ada: the whole pool's), leave_one_out "
        "(RLOO: the group's other samples), tracker (SPO: the prompt's value estimate from before this step, by "
        "`estimator`), maxrl (MaxRL's (r - mean) / mean over the group) or corrected (the HM fork's "
        "stratified-downsampling correction); each strategy defaults to its paper's",
    )  # planned: a baseline decides whether a kept group of n has signal (`simulation.law`)
    scale_std: bool = option(
        True, "divide advantages by the std (GRPO's; off for seq/est, as the official code)", plan=False
    )
    correction: str = option(
        "none", "explicit per-prompt weight f'(p_hat) from the pool (paper v3 §3.2): none or objective", plan=False
    )
    objective: str = option(
        "log", "objective f for allocation=objective and the optional correction: linear, log, power"
    )
    alpha: float = option(0.5, "exponent of the power objective")
    eps: float = option(1e-3, "floor added to p_hat in 1/sqrt(p_hat + eps) allocation and weights")
    batch_normalize: str = option(
        "none",
        "after each group's advantages, (A - mean) / std over the step's trained samples (SPO's): none, samples (each "
        "sample once) or tokens (weighted by completion tokens, as a token-mean loss sees them; SPO++)",
        plan=False,
    )

    @property
    def resolved_advantage(self) -> str:
        """`advantage` (0.3's name, when its default was None: the strategy's own)."""
        return self.advantage

    @property
    def resolved_scale_std(self) -> bool:
        """`scale_std` (0.3's name, as `resolved_advantage`)."""
        return self.scale_std


@dataclass(frozen=True)
class MemoryOptions:
    """The strategy's prompt memory across steps (`sampling.memory`): the pass-rate tracker and the predictor."""

    estimator: str = option(
        "tracker",
        "where a prompt's pass-rate estimate comes from (est allocation, seq give_up, mopps, select=value): tracker "
        "(Beta-prior EMA of its own visits), predictor (learned from prompt features over all prompts) or both (the "
        "predictor is the tracker's prior, strength prior_alpha + prior_beta), level (the running pass rate of the "
        "prompt's difficulty level is that prior) or oracle (the exact pass rate under the current policy, free of "
        "budget: a benchmark ceiling, our trainer on exact-answer tasks and the simulator only)",
    )
    prior_file: str | None = option(
        None,
        "a pass-rate file (JSONL, CSV or a JSON array; rows with id or prompt, and pass_rate; e.g. `reinforce-ada "
        "filter --rates`) whose rates are the prior mean of the prompts it lists (strength prior_alpha + prior_beta); "
        "a prior measured by sampling costs tokens a comparison must charge",
        plan=False,  # the planner is given the pass rates; its simulated prompts are in no file
    )
    prior_decays: bool = option(
        False,
        "the prior is the prompt's first counts and is forgotten with them at `decay` per visit (SPO's rule), instead "
        "of fixed pseudo-counts beside them (the Ada-EMA and MoPPS rule)",
    )
    prior_alpha: float = option(1.0, "pass-rate tracker: Beta prior alpha")
    prior_beta: float = option(1.0, "pass-rate tracker: Beta prior beta")
    decay: float = option(
        0.9, "pass-rate tracker: exponential decay of past counts per visit (lambda in (0, 1])", plan=False
    )
    forgetting: str = option(
        "fixed",
        "how a visit discounts a prompt's counts: fixed (by `decay`) or drift (SPO's KL-adaptive rho = clip(2^(-D / "
        "drift_half), rho_min, rho_max), D the policy's token-mean |log-ratio| on the prompt's last response since its "
        "last visit; our trainer and the simulator)",
        plan=False,
    )
    drift_half: float = option(
        0.06, "forgetting=drift: the drift D at which old evidence counts half (recipe 0.06)", plan=False
    )
    rho_min: float = option(0.875, "forgetting=drift: the smallest discount per visit (recipe 0.875)", plan=False)
    rho_max: float = option(0.96, "forgetting=drift: the largest discount per visit (recipe 0.96)", plan=False)
    forget: float = option(
        1.0,
        "prompt memory: a prompt's counts are read discounted by forget^(steps since its last visit), so an old "
        "belief widens back toward the prior as the policy moves on (1 = off, every paper's rule; ours, for "
        "select=value and mopps on pools visited rarely)",
        plan=False,
    )
    history: int = option(
        16, "recent rewards remembered per prompt (knapsack's p_hat, paper 16); an estimate needs half", plan=False
    )
    predictor_lr: float = option(
        0.2, "difficulty predictor: step size of its damped Fisher-scoring update per visit", plan=False
    )
    predictor_dim: int = option(
        4096, "difficulty predictor: hashed character-trigram buckets of the prompt text (0: none)", plan=False
    )


@dataclass(frozen=True)
class AdmissionOptions:
    """Which offered prompts a strategy is handed, before any rollout (`sampling.admission`)."""

    select: str = option(
        "none",
        "prompt selection before any rollout, on top of any strategy: a registered admission rule (none, greso, "
        "mopps, value: the candidates with the most expected signal per generated token, from the planner's law; "
        "iw: k of candidates x k drawn with inclusion probability from sqrt(E[P(signal)]), Horvitz-Thompson "
        "weights, ours; priority: SPO's draw, k of candidates x k with probability ~ sqrt(v_hat (1 - v_hat)) + "
        "priority_eps)",
    )
    candidates: int = option(
        16,
        "mopps, select=value, select=iw and select=priority (spo): candidate prompts considered per prompt trained "
        "(paper 16)",
        plan=False,
    )
    target: float = option(
        0.5, "mopps: target pass rate; prompts whose sampled posterior lies nearest are chosen", plan=False
    )
    zero_variance_target: float = option(
        0.25, "greso: target zero-variance share of sampled prompts; the skip probabilities adapt toward it"
    )
    select_explore: float = option(
        0.0,
        "select=value: share of candidates valued at a Thompson draw from their pass-rate posterior instead of the "
        "posterior expectation (0: greedy on expected signal per token; 1: every candidate Thompson-sampled)",
        plan=False,
    )
    evict: float | None = option(
        None,
        "skip in every later step a prompt whose pass rate on a visit was >= evict (pilot_commit's default 1.0; "
        "off for the others; a value > 1 turns it off)",
        plan=False,
    )
    iw_mix: float = option(
        0.2,
        "select=iw: share lam in [0, 1] of the uniform proposal in the defensive mixture (1 - lam) u / sum(u) + lam / "
        "(candidates x k); it bounds the weights by 1 / lam",
        plan=False,
    )
    iw_clip: float = option(
        3.0, "select=iw: clip each Horvitz-Thompson weight at this (>= 1) before the self-normalisation", plan=False
    )
    iw_weights: bool = option(
        True,
        "select=iw: multiply each admitted prompt's loss by its weight (false: the same draw, weights 1)",
        plan=False,
    )
    priority_eps: float = option(
        0.05, "select=priority (SPO's draw): the floor eps of the weight sqrt(v_hat (1 - v_hat)) + eps (paper 0.05)"
    )

    @property
    def resolved_evict(self) -> float | None:
        """The eviction threshold in force, or None when eviction is off."""
        return self.evict if self.evict is not None and self.evict <= 1.0 else None

    @property
    def resolved_select(self) -> str:
        """`select` (0.3's name, when its default was None: the strategy's own)."""
        return self.select


@dataclass(frozen=True)
class Options(BaselineOptions, MemoryOptions, AdmissionOptions):
    """The options every strategy has (module docstring, 1); a strategy's own options subclass this."""

    threshold: float = option(0.5, "a sample is correct iff reward > threshold (the official code used 0.7)")
    n: int = option(4, "group size trained on per prompt (uniform/dynamic: samples per prompt; seq: kept per prompt)")

    def __post_init__(self) -> None:
        for f in fields(self):  # each of its declared type; no float NaN or infinite (evict: None or > 1 turns it off)
            value = getattr(self, f.name)
            of_type(f.name, value, type_name(f.type))
            if f.name != "evict" and isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name}={value!r} must be a finite number")
        if not 0.0 <= self.threshold < 1.0:
            raise ConfigError(
                f"threshold={self.threshold} is out of range; it must be in [0, 1) (a sample is correct iff reward > "
                "threshold; the built-in verifiers give 0 or 1)"
            )
        at_least("n", self.n, 1)
        # baseline and weights
        choice("advantage", self.advantage, tuple(ADVANTAGES))
        boolean("scale_std", self.scale_std)
        choice("correction", self.correction, CORRECTIONS)
        choice("batch_normalize", self.batch_normalize, BATCH_NORMS)
        choice("objective", self.objective, tuple(OBJECTIVES))
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"alpha={self.alpha} is out of range; it must be in (0, 1]")
        positive("eps", self.eps)
        # prompt memory
        choice("estimator", self.estimator, ESTIMATORS)
        positive("prior_alpha", self.prior_alpha)
        positive("prior_beta", self.prior_beta)
        if not 0.0 < self.decay <= 1.0:
            raise ConfigError(f"decay={self.decay} is out of range; it must be in (0, 1]")
        if not 0.0 < self.forget <= 1.0:
            raise ConfigError(f"forget={self.forget} is out of range; it must be in (0, 1] (1 = off)")
        at_least("history", self.history, 2)
        positive("predictor_lr", self.predictor_lr)
        at_least("predictor_dim", self.predictor_dim, 0)
        fits_memory("predictor_dim", self.predictor_dim, 32, "the difficulty predictor's weights and state")
        boolean("prior_decays", self.prior_decays)
        choice("forgetting", self.forgetting, ("fixed", "drift"))
        positive("drift_half", self.drift_half)
        if not 0.0 < self.rho_min <= self.rho_max <= 1.0:
            raise ConfigError(f"rho_min={self.rho_min}, rho_max={self.rho_max}: need 0 < rho_min <= rho_max <= 1")
        if self.prior_file is not None and (not isinstance(self.prior_file, str) or not self.prior_file.strip()):
            raise ConfigError(f"prior_file={self.prior_file!r} must be a path to a pass-rate file, or none")
        if self.prior_file is not None and self.estimator == "oracle":
            raise ConfigError("prior_file does not apply to estimator='oracle' (the exact rate needs no prior)")
        # admission (`select` is checked against the admission registry by `sampling.configure`)
        at_least("candidates", self.candidates, 1)
        fits_memory("candidates", self.candidates, 1024, "candidate prompts drawn per prompt a step takes")
        unit("target", self.target)
        unit("zero_variance_target", self.zero_variance_target)
        unit("select_explore", self.select_explore)
        if self.evict is not None and not self.evict > 0:
            raise ConfigError(f"evict={self.evict} is out of range; it must be > 0 (a value > 1 turns eviction off)")
        unit("iw_mix", self.iw_mix)
        if isinstance(self.iw_clip, bool) or not self.iw_clip >= 1.0:
            raise ConfigError(
                f"iw_clip={self.iw_clip!r} is out of range; it must be >= 1 (the cap on a Horvitz-Thompson weight)"
            )
        boolean("iw_weights", self.iw_weights)
        if not 0.0 < self.priority_eps < float("inf"):
            raise ConfigError(
                f"priority_eps={self.priority_eps} is out of range; it must be > 0 (every prompt drawable)"
            )

    def replace(self, **changes: Any) -> Options:
        return replace(self, **changes)


GROUPS: dict[str, type] = {
    "baseline and weights": BaselineOptions,
    "prompt memory": MemoryOptions,
    "admission": AdmissionOptions,
}
"""The shared option groups, as `--help` and the docs show them (the strategy's own options come first)."""


@dataclass(frozen=True)
class OptionSpec:
    """One option of an options class, as the CLI, TOML, TRL and the docs read it."""

    name: str
    type: str
    """The declared type as written (`int | None`): what `coerce_value` converts text to."""
    default: Any
    help: str
    group: str
    """`own` (the strategy's), `common` (threshold, n) or a key of `GROUPS`."""
    plan: bool


def option_specs(cls: type[Options]) -> list[OptionSpec]:
    """Every option of an options class, its own first, then the common ones, then the shared groups."""
    shared = {f.name: g for g, base in GROUPS.items() for f in fields(base)}
    common = {f.name for f in fields(Options)} - set(shared)
    specs = []
    for f in fields(cls):
        group = shared.get(f.name) or ("common" if f.name in common else "own")
        specs.append(
            OptionSpec(
                f.name, type_name(f.type), f.default, f.metadata.get("help", ""), group, f.metadata.get("plan", True)
            )
        )
    order = {"own": 0, "common": 1, **{g: 2 + i for i, g in enumerate(GROUPS)}}
    return sorted(specs, key=lambda s: order[s.group])


def type_name(t: Any) -> str:
    """A field's declared type as text (`int | None`): annotations are strings under `from __future__ import
    annotations`, classes or typing objects without it (an options class written in a user's file)."""
    if isinstance(t, str):
        return t
    if isinstance(t, type) and not getattr(t, "__args__", None):
        return t.__name__
    args = typing.get_args(t)
    if args and typing.get_origin(t) in (typing.Union, types.UnionType):  # Optional[int], Union[int, None], int | None
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    return str(t).replace("typing.", "").replace("NoneType", "None")


def coerce_value(where: str, value: Any, typ: str) -> Any:
    """Check and convert a TOML, CLI or arm-spec value against a field's declared type (a string such as
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
