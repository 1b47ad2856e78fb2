"""The one place docgen reads an options class (`sampling.options.option_specs`): the reference page of strategy
options and the strategy pages both go through `options`, so a change of the options API is one edit here."""

from __future__ import annotations

from typing import Any


def options(options_cls: type[Any]) -> list[Any]:
    """Every option of `options_cls` as `sampling.options.OptionSpec`s (name, type, default, help, group: `own`,
    `common` or a shared group), its own first."""
    from reinforce_ada.sampling.options import option_specs

    return option_specs(options_cls)
