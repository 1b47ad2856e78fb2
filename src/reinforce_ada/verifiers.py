"""Verifiers: plain callables `(completion, answer) -> float` in one registry.

`get(name)` accepts a registered name or `module:function` for a user callable. Verifiers judge only the final
answer they extract, never the whole completion (a model that echoes the question would otherwise score).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import arithmetic

Verifier = Callable[[str, str], float]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def exact(completion: str, answer: str) -> float:
    """1.0 iff the stripped completion equals the stripped answer.

    >>> exact(" 42 ", "42")
    1.0
    """
    return 1.0 if completion.strip() == answer.strip() else 0.0


def _to_float(s: str) -> float | None:
    s = s.replace(",", "")
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            return float(num) / float(den)
        return float(s)
    except (ValueError, ZeroDivisionError):
        return None


def numeric(completion: str, answer: str, *, rel_tol: float = 1e-6) -> float:
    """1.0 iff the last number in the completion equals the answer's number within `rel_tol`.

    >>> numeric("so the total is 1,250.", "1250")
    1.0
    >>> numeric("3/4", "0.75")
    1.0
    >>> numeric("no number", "3")
    0.0
    """
    found = _NUMBER.findall(completion)
    want = _to_float(answer.strip())
    got = _to_float(found[-1]) if found else None
    if want is None or got is None:
        return 0.0
    return 1.0 if abs(got - want) <= rel_tol * max(1.0, abs(want)) else 0.0


VERIFIERS: dict[str, Verifier] = {"exact": exact, "numeric": numeric, "arithmetic": arithmetic.verify}


def get(name: str) -> Verifier:
    """A registered verifier, or `package.module:function` imported on demand."""
    if name in VERIFIERS:
        return VERIFIERS[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"verifier {name!r} could not be imported: {e}") from None
        if not callable(fn):
            raise ConfigError(f"verifier {name!r} is not callable")
        return fn
    raise ConfigError(f"unknown verifier {name!r}; choose one of {sorted(VERIFIERS)} or give module:function")
