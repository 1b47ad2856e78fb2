"""Prompt admission before any rollout, in front of any strategy: eviction and the `select` rules.

`registry.ADMISSIONS` names the rules (`select=none|greso|mopps|value|iw`), each one class with the signature of
`rule.AdmissionRule`; `stage.with_admission(Base)` puts the collection stage in front of a sampler.
"""

from __future__ import annotations

from reinforce_ada.sampling.admission.greso import Greso, greso_skip_share
from reinforce_ada.sampling.admission.mopps import mopps_choose
from reinforce_ada.sampling.admission.registry import ADMISSIONS, admission_rule, register_admission
from reinforce_ada.sampling.admission.rule import AdmissionRule, RuleContext
from reinforce_ada.sampling.admission.stage import Admission, needs_admission, with_admission

__all__ = [
    "ADMISSIONS",
    "Admission",
    "AdmissionRule",
    "Greso",
    "RuleContext",
    "admission_rule",
    "greso_skip_share",
    "mopps_choose",
    "needs_admission",
    "register_admission",
    "with_admission",
]
