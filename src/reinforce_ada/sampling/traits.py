"""What a strategy is, declared on its class beside its options: the one place its character is written down.

Every registered strategy class carries `traits = Traits(...)` and `Options` (its options class, `sampling.options`:
what it reads, with its defaults -- its baseline among them); the trainer, the planner, the engines, the CLI and
`compare` ask the class (`strategy_class(name)`) and never restate a strategy's name. A `PoolStrategy` subclass that
neither declares traits nor inherits them from a concrete strategy fails at class creation, and
`tests/test_admission_extension.py` checks every registered class against this record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

PLANNERS = ("group", "allocation", "sequential", "pilot", "monte_carlo")
"""How `reinforce-ada plan` computes a strategy's law for one visit at a known pass rate:
group: one batch of `n` samples (closed form); allocation: one batch whose size the class's `plan_counts` gives for
the whole batch of rates (closed form given the counts); sequential: Seq's exit rule (exact enumeration);
pilot: Pilot-Commit's pilot and band (closed form); monte_carlo: no closed form -- run the strategy itself on a
frozen simulated policy."""


@dataclass(frozen=True)
class Traits:
    """A strategy's character (see the module docstring)."""

    streams: bool
    """Sampled without round barriers (continuous batching + streaming scheduler) by default."""
    planner: str
    """One of PLANNERS."""
    takes_predictor: bool = False
    """`build_strategy(cfg, predictor=...)` accepted (a prompt -> p_hat callable replacing the memory's estimate)."""
    drops_uniform: bool = False
    """A group whose rewards all agree is dropped, whatever the baseline (DAPO's dynamic sampling): the planner counts
    it as no signal even under `advantage=tracker`."""

    def __post_init__(self) -> None:
        if self.planner not in PLANNERS:
            raise TypeError(f"Traits.planner={self.planner!r}; choose one of {list(PLANNERS)}")

    def replace(self, **changes) -> Traits:
        return replace(self, **changes)


TRAIT_NAMES = tuple(f.name for f in fields(Traits))
