"""A strategy's configuration: its registered name, its options (the strategy's own class) and its seed.

This module knows no strategy. Which options class goes with a name is the registry's (`sampling.strategies`);
`sampling.configure.strategy_config("seq", k_pos=2)` builds a config from flat names (as the CLI, TOML files, arm
specs and the integrations do), and `StrategyConfig("seq", Seq.Options(k_pos=2))` is the same, typed (a feature's
options need their class joined: `sampling.options.make_options(Seq.Options, select="iw", iw_mix=0.3)`).
An option is read one way: `cfg.options.k_pos` (a strategy's `self.opts` is its config's options).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from reinforce_ada.errors import ConfigError

if TYPE_CHECKING:
    from reinforce_ada.sampling.options import Options


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy, configured: its registered name, its options (an instance of its class's `Options`) and its seed.

    Make one with `strategy_config("seq", k_pos=2)` or `parse_arm("seq:k_pos=2")`; `cfg.options.k_pos` reads an
    option, and `cfg.replace(k_pos=3)` changes options by name.
    """

    name: str
    """The registered strategy name (`sampling.strategies.STRATEGIES`)."""
    options: Options
    """The strategy's options: an instance of its class's `Options`."""
    seed: int = 0
    """Seed of the strategy's own generator (downsampling, admission draws); the trainer sets the run's seed."""

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed={self.seed!r} is out of range; it must be an integer >= 0")

    def replace(self, **changes: Any) -> StrategyConfig:
        """A copy with `seed` and options changed by name (the options class checks them); a new strategy name
        needs the registry: `sampling.configure.switch(cfg, name)`."""
        if "name" in changes:
            raise ConfigError("StrategyConfig.replace cannot change the strategy; use sampling.configure.switch")
        seed = changes.pop("seed", self.seed)
        if not changes:
            return replace(self, seed=seed)
        options = self.options.replace(whose=f"strategy {self.name!r}", **changes)
        return replace(self, options=options, seed=seed)

    def to_dict(self) -> dict[str, Any]:
        """Flat: name, seed and every option (the vocabulary of TOML files and arm specs)."""
        opts = {f.name: getattr(self.options, f.name) for f in fields(self.options)}
        return {"name": self.name, "seed": self.seed, **opts}
