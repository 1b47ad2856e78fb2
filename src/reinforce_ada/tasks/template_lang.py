"""The GSM-Symbolic template language: a small, safe interpreter for template expressions and its functions.

Expressions are Python syntax read with `ast` and interpreted here: constants, names, arithmetic, comparisons,
`and/or/not`, `x if c else y`, indexing and calls to the functions in `PURE` and `sampling(rng)` only; no attribute
access, no `eval`. `tasks/gsm_symbolic.py` parses the templates and samples their instances with it.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from random import Random
from typing import Any

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class Unbound(NameError):
    """A name that is not (yet) assigned."""


def evaluate(node: ast.AST, env: dict[str, Any], functions: dict[str, Callable]) -> Any:
    """Interpret one expression; anything outside arithmetic, comparisons and the given functions is a ValueError.

    >>> evaluate(ast.parse("x * 3 // 2 + 1", mode="eval").body, {"x": 4}, {})
    7
    >>> evaluate(ast.parse("__import__('os')", mode="eval").body, {}, {})
    Traceback (most recent call last):
    ...
    ValueError: call to __import__ is not allowed
    """
    ev = lambda n: evaluate(n, env, functions)  # noqa: E731
    match node:
        case ast.Constant(value=v) if isinstance(v, int | float | str | bool) or v is None:
            return v
        case ast.Name(id=name):
            if name not in env:
                raise Unbound(name)
            return env[name]
        case ast.List(elts=elts):
            return [ev(e) for e in elts]
        case ast.Tuple(elts=elts):
            return tuple(ev(e) for e in elts)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
            a, b = ev(left), ev(right)
            if isinstance(op, ast.Mult) and (isinstance(a, str | list | tuple) or isinstance(b, str | list | tuple)):
                raise ValueError("sequence repetition is not allowed")  # `n * "x"` is never arithmetic
            if isinstance(op, ast.Pow) and (abs(b) > 64 or abs(a) > 1e9):
                raise ValueError(f"power {a} ** {b} is out of range")
            return _BINOPS[type(op)](a, b)
        case ast.UnaryOp(op=ast.USub(), operand=x):
            return -ev(x)
        case ast.UnaryOp(op=ast.UAdd(), operand=x):
            return +ev(x)
        case ast.UnaryOp(op=ast.Not(), operand=x):
            return not ev(x)
        case ast.BoolOp(op=ast.And(), values=values):
            return all(ev(v) for v in values)
        case ast.BoolOp(op=ast.Or(), values=values):
            return any(ev(v) for v in values)
        case ast.Compare(left=left, ops=ops, comparators=rights) if all(type(o) in _CMPOPS for o in ops):
            a = ev(left)
            for o, r in zip(ops, rights, strict=True):
                b = ev(r)
                if not _CMPOPS[type(o)](a, b):
                    return False
                a = b
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return ev(body) if ev(test) else ev(orelse)
        case ast.Subscript(value=value, slice=index):
            seq, i = ev(value), ev(index)
            if not isinstance(seq, list | tuple | str) or not isinstance(i, int):
                raise ValueError("only a list, tuple or string can be indexed, by an integer")
            return seq[i]
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]):
            if name not in functions:
                raise ValueError(f"call to {name} is not allowed")
            return functions[name](*[ev(a) for a in args])
    raise ValueError(f"{type(node).__name__} is not allowed in a template expression")


def is_int(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, Fraction):
        return x.denominator == 1
    return isinstance(x, int) or (isinstance(x, float) and math.isfinite(x) and abs(x - round(x)) < 1e-6)


def _divides(a: Any, b: Any) -> bool:
    return b != 0 and a % b == 0


def _ensure_int(x: Any) -> int:
    if not is_int(x):
        raise ValueError(f"{x} is not an integer")
    return round(x)


def _fraction(x: Any) -> str:
    if isinstance(x, float):
        f = Fraction(x).limit_denominator()
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
    return str(x)


def _plural(n: Any, one: str, other: str) -> str:
    return one if abs(n) == 1 else other


PURE: dict[str, Callable] = {
    "is_int": is_int,
    "divides": _divides,
    "ensure_int": _ensure_int,
    "int": int,
    "float": float,
    "round": round,
    "str": str,
    "len": len,
    "list": list,
    "abs": abs,
    "min": min,
    "max": max,
    "Fraction": _fraction,
    "plural": _plural,
}


def sampling(rng: Random) -> dict[str, Callable]:
    """The template language's random draws (bounds inclusive, as in the package's sampler)."""

    def sample(items: list, n: int = 1) -> Any:
        return rng.choice(items) if n == 1 else rng.sample(items, n)

    def range_(start: int, end: int, step: int = 1) -> int:
        return rng.choice(range(start, end + 1, step))

    def arange(start: float, end: float, step: float = 1) -> float:
        k = rng.randint(0, round((end - start) / step))
        places = len(str(step).split(".")[1]) if "." in str(step) else 0
        return round(start + k * step, places)

    def range_str(start: int, end: int, step: int, words: list) -> tuple:
        return rng.choice([(words[i - 1], i) for i in range(start, end + 1, step) if 0 < i <= len(words)])

    def sample_sequential(items: list, n: int) -> list:
        first = rng.randrange(len(items))
        return [items[(first + j) % len(items)] for j in range(n)]

    return {
        "sample": sample,
        "range": range_,
        "range_list": lambda a, b, s=1: list(range(a, b, s)),
        "arange": arange,
        "range_str": range_str,
        "sample_sequential": sample_sequential,
    }
