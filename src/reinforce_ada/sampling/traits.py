"""What a strategy is, declared on its class: the one place its character is written down.

Every registered strategy class carries `traits = Traits(...)`; the trainer, the planner, the engines, the CLI and
`compare` ask the class (`strategy_class(name).traits`) and never restate a strategy's name. A `PoolStrategy`
subclass that neither declares traits nor inherits them from a concrete strategy fails at class creation, and
`tests/test_strategy_contract.py` checks every registered class against this record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

BASELINES = ("group", "global")
PLANNERS = ("group", "allocation", "sequential", "pilot", "monte_carlo")
"""How `reinforce-ada plan` computes a strategy's law for one visit at a known pass rate:
group: one batch of `n` samples (closed form); allocation: one batch whose size the class's `plan_counts` gives for
the whole batch of rates (closed form given the counts); sequential: Seq's exit rule (exact enumeration);
pilot: Pilot-Commit's pilot and band (closed form); monte_carlo: no closed form -- run the strategy itself on a
frozen simulated policy."""


@dataclass(frozen=True)
class Traits:
    """A strategy's character (see the module docstring)."""

    baseline: str
    """Default advantage baseline: `group` (GRPO: per-group mean, with std) or `global` (Reinforce-Ada: the whole
    pool's mean, no std)."""
    streams: bool
    """Sampled without round barriers (continuous batching + streaming scheduler) by default."""
    spends_budget: bool
    """Reads `budget` (total samples per step) and needs batch_size x min_samples <= budget."""
    planner: str
    """One of PLANNERS."""
    reads: tuple[str, ...]
    """The StrategyConfig fields the strategy reads (beyond `name` and `seed`); documentation and contract test."""
    default_select: str = "none"
    """Prompt admission built into the name (`greso`, `mopps`), else none."""
    default_evict: float | None = None
    """Eviction threshold built into the strategy (Pilot-Commit: 1.0), else None (off)."""
    takes_predictor: bool = False
    """`build_strategy(cfg, predictor=...)` accepted (a prompt -> p_hat callable replacing the memory's estimate)."""

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise TypeError(f"Traits.baseline={self.baseline!r}; choose one of {list(BASELINES)}")
        if self.planner not in PLANNERS:
            raise TypeError(f"Traits.planner={self.planner!r}; choose one of {list(PLANNERS)}")
        if self.default_select not in ("none", "greso", "mopps"):
            raise TypeError(f"Traits.default_select={self.default_select!r}; choose none, greso or mopps")

    def replace(self, **changes) -> Traits:
        from dataclasses import replace

        return replace(self, **changes)


TRAIT_NAMES = tuple(f.name for f in fields(Traits))
