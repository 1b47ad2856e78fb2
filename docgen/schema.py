"""What a page needs of a file's shape, declared beside the page and checked before it is written (`check`): a field
missing or of a type that is not the study's is a `PageDataError` naming the file and the field.

A spec is a type (`str`, `bool`, `NUMBER`, `NONE`, `dict`, `list`), a tuple of specs (any one of them), a dict of
field specs (`"key"` required, `"key?"` optional, `"*"` every other key) or a one-item list (every item). The
figures of a summary.json (`FIGURE`, `summary`) are the shared case: a figure with a `what` has its `value` or its
`pools`, and each pool its `value` -- a claim without its pools, or a value that is text, is refused, never shown as
"no result yet".
"""

from __future__ import annotations

from typing import Any

from docgen.published import PageDataError, number_ok, where

NUMBER = "number"
"""A finite int or float (not a bool), within `published.LARGEST`."""
NONE = type(None)
TEXT = str


def _kind(x: Any) -> str:
    if x is None:
        return "null"
    for t, name in ((bool, "true/false"), (str, "text"), (dict, "an object"), (list, "a list")):
        if isinstance(x, t):
            return f"{name} ({x!r})" if t in (bool, str) else name
    return f"the number {x!r}" if isinstance(x, int | float) else type(x).__name__


def _fits(x: Any, spec: Any) -> bool:
    if spec == NUMBER:
        return number_ok(x)
    if isinstance(spec, type):
        return isinstance(x, spec) and not (spec is int and isinstance(x, bool))
    if isinstance(spec, tuple):
        return any(_fits(x, s) for s in spec)
    if isinstance(spec, dict):
        return isinstance(x, dict)
    if isinstance(spec, list):
        return isinstance(x, list)
    raise TypeError(f"not a spec: {spec!r}")


def _name(spec: Any) -> str:
    if spec == NUMBER:
        return "a number"
    if isinstance(spec, tuple):
        return " or ".join(_name(s) for s in spec)
    if isinstance(spec, dict):
        return "an object"
    if isinstance(spec, list):
        return "a list"
    return {str: "text", bool: "true/false", NONE: "null", dict: "an object", list: "a list"}.get(spec, str(spec))


def check(doc: Any, spec: Any, origin: tuple[str, str] | None = None) -> None:
    """`doc` (read through `docgen.published`) against `spec`; the first mismatch is a `PageDataError` naming the file
    and the field."""
    origin = origin or getattr(doc, "origin", ("(not from a file)", ""))
    if not _fits(doc, spec):
        raise PageDataError(f"{where(origin)}: {_kind(doc)} where the study writes {_name(spec)}")
    if isinstance(spec, tuple):
        spec = next(s for s in spec if _fits(doc, s))
    if isinstance(spec, dict):
        fields = {k.rstrip("?"): (v, k.endswith("?")) for k, v in spec.items() if k != "*"}
        for key, (sub, optional) in fields.items():
            if key not in doc:
                if not optional:
                    raise PageDataError(f"{where(origin, key)} is missing")
                continue
            check(doc[key], sub, _at(doc, origin, key))
        if "*" in spec:
            for key, v in doc.items():
                if key not in fields:
                    check(v, spec["*"], _at(doc, origin, key))
    elif isinstance(spec, list):
        for i, v in enumerate(doc):
            check(v, spec[0], _at(doc, origin, i))


def _at(parent: Any, origin: tuple[str, str], key: Any) -> tuple[str, str]:
    child = parent[key]
    if hasattr(child, "origin"):
        return child.origin
    path = origin[1]
    return origin[0], (f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key))


OPT_NUMBER = (NUMBER, NONE)
ESTIMATE = {
    "value?": OPT_NUMBER,
    "lo?": OPT_NUMBER,
    "hi?": OPT_NUMBER,
    "t_lo?": OPT_NUMBER,
    "t_hi?": OPT_NUMBER,
    "per_seed?": ([OPT_NUMBER], NONE),
    "arm?": (str, NONE),
    "preregistered?": (bool, NONE),
    "best_after_the_fact?": (dict, bool, NONE),
    "status?": (str, NONE),
    "missing?": (str, NONE),
}
"""A figure's number with its intervals, as `docgen.cells` reads it."""
POOL = {**ESTIMATE, "value": OPT_NUMBER}
FIGURE = {**ESTIMATE, "what": str, "goal?": (str, NONE), "date?": str, "command?": str, "pools?": {"*": POOL}}
"""A summary.json figure (an entry with `what`); one without `what` (a nested record, e.g. P4's) is not published."""


def summary(doc: Any) -> None:
    """Every figure of a summary.json: `FIGURE`'s fields, and its `value` or a non-empty `pools` (a claim without its
    pools, or a figure without its value, is an error, never a quiet "no result yet")."""
    check(doc, {"*": dict})
    for e in doc.values():
        if "what" not in e:
            check(e, {"date?": str, "*": (dict, str, bool, NUMBER, NONE, list)}, e.origin)
            continue
        check(e, FIGURE, e.origin)
        if "value" not in e and not e.get("pools"):
            raise PageDataError(f"{where(e.origin)}: a figure with neither its value nor its pools")
