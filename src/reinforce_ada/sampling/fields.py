"""How an option is declared, wherever it lives: `option(default, help, plan=...)`, `same_as`, and `FeatureOptions`.

1) `option` is a dataclass field with its help (the CLI's, the TOML's and the docs') and `plan`: `plan=False` marks
   an option that never changes how many samples a visit draws or whether it has signal (downsampling, std scaling,
   weights, cross-step trackers), so `reinforce-ada plan` offers no flag for it.
2) `FeatureOptions` is the base of the options that exist only while a feature is on: an admission rule's
   (`select=iw` brings `iw_mix`, `iw_clip`, `iw_weights`) or a memory mode's (`forgetting=drift` brings `drift_half`,
   `rho_min`, `rho_max`). Such a class sits beside its feature's code, checks its own values in `check()`, and is
   joined to a strategy's options only when the feature is on (`sampling.options.options_class`).
This module is a leaf: the option groups of `sampling.options`, the memory's and the rules' all import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def option(default: Any, help: str, *, plan: bool = True) -> Any:
    """A field of an options class, with its help (module docstring, 1)."""
    return field(default=default, metadata={"help": help, "plan": plan})


def same_as(base: type, name: str, default: Any) -> Any:
    """The option `name` of `base` with another default: a strategy's own default for a shared option (Seq's
    baseline is the whole pool's mean), with the shared help."""
    return field(default=default, metadata=base.__dataclass_fields__[name].metadata)


@dataclass(frozen=True)
class FeatureOptions:
    """The options of one feature (module docstring, 2). A subclass adds fields with `option(...)` and its checks in
    `check()`; the strategy's options run the `check()` of every feature class they are composed with."""

    def check(self) -> None:
        """Checks of this class's own fields (raise ConfigError naming the option, the value and what is valid)."""
