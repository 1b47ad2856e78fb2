"""`greso`: DAPO dynamic sampling with GRESO's pre-rollout skipping in front, as the GRESO paper trains it.

The rule itself is an admission rule (`sampling.admission.greso`; `select=greso` puts it in front of any other
strategy); this name only presets it on `dynamic`.
"""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.sampling.options import same_as
from reinforce_ada.sampling.strategies.dynamic import Dynamic, DynamicOptions


@dataclass(frozen=True)
class GresoOptions(DynamicOptions):
    select: str = same_as(DynamicOptions, "select", "greso")


class GresoDynamic(Dynamic):
    Options = GresoOptions
    select_fixed = True
