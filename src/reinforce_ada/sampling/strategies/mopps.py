"""`mopps`: GRPO with MoPPS's posterior prompt selection in front, as the MoPPS paper trains it.

The rule itself is an admission rule (`sampling.admission.mopps`; `select=mopps` puts it in front of any other
strategy); this name only presets it on `uniform`.
"""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.sampling.options import Options, same_as
from reinforce_ada.sampling.strategies.uniform import Uniform, UniformOptions


@dataclass(frozen=True)
class MoppsUniformOptions(UniformOptions):
    select: str = same_as(Options, "select", "mopps")


class MoppsUniform(Uniform):
    Options = MoppsUniformOptions
    select_fixed = True
