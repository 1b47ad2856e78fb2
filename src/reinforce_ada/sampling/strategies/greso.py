"""`greso`: DAPO dynamic sampling with GRESO's pre-rollout skipping in front, as the GRESO paper trains it.

The rule itself is `strategies.select` (`select=greso` puts it in front of any other strategy); this name only
presets it on `dynamic`.
"""

from __future__ import annotations

from reinforce_ada.sampling.strategies.dynamic import Dynamic


class GresoDynamic(Dynamic):
    traits = Dynamic.traits.replace(default_select="greso", reads=(*Dynamic.traits.reads, "zero_variance_target"))
