"""`mopps`: GRPO with MoPPS's posterior prompt selection in front, as the MoPPS paper trains it.

The rule itself is `strategies.select` (`select=mopps` puts it in front of any other strategy); this name only
presets it on `uniform`.
"""

from __future__ import annotations

from reinforce_ada.sampling.strategies.uniform import Uniform


class MoppsUniform(Uniform):
    traits = Uniform.traits.replace(default_select="mopps", reads=(*Uniform.traits.reads, "target", "candidates"))
