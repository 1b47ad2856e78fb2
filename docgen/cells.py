"""How the results pages write a number: two decimals, an interval, a goal read from its registration's words, and
the verdict of a figure against its goal (`verdict`: where the interval lies, not only the point). A figure's value
and interval ends that are not numbers (text, true/false, NaN) are an error naming the file and the field
(`number`), never "1.00" or "nan"."""

from __future__ import annotations

import re
from typing import Any

from docgen.published import PageDataError, number_ok, where


def f2(x: float | None) -> str:
    if x is not None and not number_ok(x):
        raise PageDataError(f"{x!r} is not a number to publish")
    return "n/a" if x is None else f"{x:.2f}"


def number(e: dict[str, Any], key: str) -> float | None:
    """`e[key]` when it is a number or absent/null; else a `PageDataError` naming the file and field (`e`'s origin)."""
    x = e.get(key)
    if x is None or number_ok(x):
        return x
    raise PageDataError(f"{where(getattr(e, 'origin', ('a result', '')), key)}: {x!r} is not a number to publish")


def interval(e: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """The entry's 90% interval: the t-interval where the study has one (what its write-up quotes), else the
    bootstrap one; none over a single seed (a bootstrap of one value is that value, not an interval)."""
    if isinstance(e.get("per_seed"), list) and len(e["per_seed"]) < 2:
        return None, None, ""
    for lo, hi, kind in (("t_lo", "t_hi", "t"), ("lo", "hi", "bootstrap")):
        if number(e, lo) is not None:
            if number(e, hi) is None:  # one end of an interval is no interval
                raise PageDataError(f"{where(getattr(e, 'origin', ('a result', '')), hi)} is missing beside {lo}")
            return e[lo], e[hi], kind
    return None, None, ""


def with_interval(e: dict[str, Any]) -> str:
    lo, hi, _ = interval(e)
    v = number(e, "value")
    if v is None:
        return "n/a"
    return f"{f2(v)} [{f2(lo)}, {f2(hi)}]" if lo is not None else f2(v)


def threshold(goal: str | None, pool: str | None = None) -> tuple[str, float] | None:
    """The goal's comparison for `pool`: `>= 2.0 on default and hard, >= 1.5 on small` reads per pool; a goal with
    no number, or one that starts with `none`, has no threshold."""
    if not goal or goal.strip().lower().startswith("none"):
        return None
    parts = re.findall(r"(>=|<=)\s*(\d+(?:\.\d+)?)(?:\s+on\s+((?:\w+(?:,\s*|\s+and\s+)?)+))?", goal)
    for op, num, pools in parts:
        if pool and pools and pool in re.findall(r"\w+", pools):
            return op, float(num)
    return (parts[0][0], float(parts[0][1])) if parts else None


def verdict(e: dict[str, Any], goal: str | None, pool: str | None = None) -> str:
    """Met / missed against the goal's threshold, saying where the interval lies (never more than the data say)."""
    t = threshold(goal, pool)
    v = number(e, "value")
    if t is None or v is None:
        return "reported (no goal)" if v is not None else "undefined"
    op, g = t
    lo, hi, _ = interval(e)
    sign = 1 if op == ">=" else -1
    near, far = (lo, hi) if op == ">=" else (hi, lo)
    rule = re.search(r"interval(?:'s lower end)? (above|excluding) (\d+(?:\.\d+)?)", str(goal))
    if sign * (v - g) >= 0 and rule and lo is not None and hi is not None:  # the goal's own interval condition
        x = float(rule.group(2))
        holds = lo > x if rule.group(1) == "above" else not lo <= x <= hi
        return "**met**" if holds else f"missed (the interval reaches {rule.group(2)})"
    if sign * (v - g) >= 0 and rule:  # no interval to check the goal's own condition against (one seed)
        return "**met** on the point estimate (no interval)"
    if sign * (v - g) >= 0:
        return "**met**" + ("" if near is None or sign * (near - g) >= 0 else " on the point estimate")
    if far is not None and sign * (far - g) < 0:
        return "missed (interval excludes the goal)"
    return "missed" + ("" if far is None else " (interval reaches it)")


def code(text: Any) -> str:
    """Inline code inside a table cell (`docgen.reference.code`)."""
    from docgen.reference import code as _code

    return _code(text)


def cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
