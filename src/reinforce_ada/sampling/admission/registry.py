"""ADMISSIONS: `select=NAME` -> its admission rule class, the only list of names (one signature: `Rule(opts, ctx)`,
`sampling.admission.rule`). A new rule is one file and one line here, or `register_admission("foo", Foo)`; a rule's
own options (its class's `Options`) join the flat vocabulary while `select` names it (`sampling.options.FEATURES`)."""

from __future__ import annotations

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.greso import Greso
from reinforce_ada.sampling.admission.iw import ImportanceWeighted
from reinforce_ada.sampling.admission.mopps import Mopps
from reinforce_ada.sampling.admission.priority import Priority
from reinforce_ada.sampling.admission.rule import AdmissionRule
from reinforce_ada.sampling.admission.value import Value
from reinforce_ada.sampling.options import register_feature

ADMISSIONS: dict[str, type[AdmissionRule]] = {
    "none": AdmissionRule,
    "greso": Greso,
    "mopps": Mopps,
    "value": Value,
    "iw": ImportanceWeighted,
    "priority": Priority,
}
for _name, _rule in ADMISSIONS.items():
    register_feature("select", _name, _rule.Options)


def register_admission(name: str, cls: type[AdmissionRule], *, replace: bool = False) -> type[AdmissionRule]:
    """Make `cls` the rule behind `select=name` everywhere; registering a taken name needs `replace=True`."""
    if not (isinstance(cls, type) and issubclass(cls, AdmissionRule)):
        raise ConfigError(f"admission rule {name!r}: {cls!r} is not a subclass of sampling.admission.AdmissionRule")
    if name in ADMISSIONS and ADMISSIONS[name] is not cls and not replace:
        raise ConfigError(f"admission rule {name!r} is taken by {ADMISSIONS[name].__name__}; pass replace=True")
    register_feature("select", name, cls.Options)
    ADMISSIONS[name] = cls
    return cls


def admission_rule(name: str) -> type[AdmissionRule]:
    if name not in ADMISSIONS:
        raise ConfigError(f"select={name!r} is not valid; choose one of {list(ADMISSIONS)}")
    return ADMISSIONS[name]
