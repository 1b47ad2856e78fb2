"""Prompt admission before any rollout, in front of any strategy: eviction and the `select` rules.

`registry.ADMISSIONS` names the rules (`select=none|greso|mopps|value|iw|priority`), one file each holding the rule
(a class with the signature of `rule.AdmissionRule`), its maths and its own options (`Options`, which exist only while
`select` names the rule); `stage.with_admission(Base)` puts the collection stage in front of a sampler. A new rule is
one file and one line in `ADMISSIONS` (or `register_admission("foo", Foo)` from outside the package).
"""

from __future__ import annotations

from reinforce_ada.sampling.admission.greso import Greso, greso_skip_share
from reinforce_ada.sampling.admission.mopps import mopps_choose
from reinforce_ada.sampling.admission.registry import ADMISSIONS, admission_rule, register_admission
from reinforce_ada.sampling.admission.rule import AdmissionRule, RankingOptions, RuleContext
from reinforce_ada.sampling.admission.stage import Admission, needs_admission, with_admission

__all__ = [
    "ADMISSIONS",
    "Admission",
    "AdmissionRule",
    "Greso",
    "RankingOptions",
    "RuleContext",
    "admission_rule",
    "greso_skip_share",
    "mopps_choose",
    "needs_admission",
    "register_admission",
    "with_admission",
]
