"""The GSM-Symbolic template language: a small, safe interpreter for template expressions and its functions.

Expressions are Python syntax read with `ast` and interpreted here: constants, names, arithmetic, comparisons,
`and/or/not`, `x if c else y`, indexing and calls to the functions in `PURE` and `sampling(rng)` only; no attribute
access, no `eval`. `tasks/gsm_symbolic.py` parses the templates and samples their instances with it.

Limits. A template is untrusted input, so no expression may build a value big enough to exhaust memory or time. Each
is checked before the work is done (or, where the result is at most a small multiple of checked operands, right
after), and breaking one raises `TemplateLimitError` (a ValueError) naming the expression and the limit:
1) source: an expression is at most `MAX_EXPR_CHARS` (10,000) characters and nests at most `MAX_DEPTH` (100)
   levels, in `parse` and again in `evaluate`, so no RecursionError can escape;
2) integers (and a Fraction's numerator plus denominator) hold at most `MAX_INT_BITS` (4,096) bits; `a ** b` needs
   |b| <= `MAX_EXPONENT` (64) and is refused before computing when bits(a) * |b| would pass `MAX_INT_BITS`;
3) lists and tuples hold at most `MAX_ITEMS` (10,000) items (`range_list`, `range_str`, `sample_sequential` and `list`
   check before building), and a string, or any value as printed, is at most `MAX_CHARS` (100,000) characters;
4) `round(x, n)` needs |n| <= `MAX_ROUND_DIGITS` (100).
Sequence repetition (`3 * "x"`, `[0] * n`) is not allowed at all: a plain ValueError, which `generate` counts as a
rejected draw like any other expression that fails (the real template 24 does this by accident).
A draw costs at most a few of these limits' worth of work; `gsm_symbolic.generate` multiplies that by `max_tries`.
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


MAX_EXPR_CHARS = 10_000
"""Longest expression source, in characters."""
MAX_DEPTH = 100
"""Deepest nesting of an expression's syntax tree."""
MAX_INT_BITS = 4_096
"""Largest integer (about 1,233 digits), and largest numerator plus denominator of a Fraction, in bits."""
MAX_EXPONENT = 64
"""Largest |b| in `a ** b`."""
MAX_ITEMS = 10_000
"""Longest list or tuple."""
MAX_CHARS = 100_000
"""Longest string, and the most characters any value may print as."""
MAX_ROUND_DIGITS = 100
"""Largest |n| in `round(x, n)` (`round(1, -10**9)` would compute 10 ** 10**9)."""


class Unbound(NameError):
    """A name that is not (yet) assigned."""


class TemplateLimitError(ValueError):
    """An expression would break one of the module's limits; the message names the expression and the limit."""


def _src(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."


def parse(src: str) -> ast.expr:
    """One expression's syntax tree, refused when longer than `MAX_EXPR_CHARS` or deeper than `MAX_DEPTH`.

    >>> parse("-" * 200 + "1")
    Traceback (most recent call last):
    ...
    reinforce_ada.tasks.template_lang.TemplateLimitError: expression '------...' nests deeper than 100 levels
    """
    src = src.strip()
    head = repr(src[:6] + "...") if len(src) > 6 else repr(src)
    if len(src) > MAX_EXPR_CHARS:
        raise TemplateLimitError(f"expression {head} has {len(src)} characters; the limit is {MAX_EXPR_CHARS}")
    try:
        tree = ast.parse(src, mode="eval").body
    except (RecursionError, MemoryError):  # deliberate: CPython's own parser limit on a deeply nested expression
        raise TemplateLimitError(f"expression {head} nests deeper than {MAX_DEPTH} levels") from None
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TemplateLimitError(f"expression {head} nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def _printed_size(value: Any) -> int:
    """About how many characters `str(value)` takes, counting only up to just past `MAX_CHARS` (so it is cheap)."""
    total, stack = 0, [value]
    while stack and total <= MAX_CHARS:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 4
        elif isinstance(v, bool) or v is None:
            total += 5
        elif isinstance(v, int):
            total += v.bit_length() * 30 // 100 + 2
        elif isinstance(v, Fraction):
            total += (v.numerator.bit_length() + v.denominator.bit_length()) * 30 // 100 + 3
        elif isinstance(v, list | tuple):
            total += 2 + 2 * len(v)
            stack.extend(v[: MAX_CHARS - total + 1] if total <= MAX_CHARS else ())
        else:
            total += 25  # floats and anything else the functions return print in a few dozen characters
    return total


def check_size(value: Any, node: ast.AST | str, *, deep: bool = True) -> Any:
    """`value` itself when it is within the limits (ints, Fractions, string and list lengths, printed size); else a
    TemplateLimitError naming the expression `node` (or a description). `deep=False` skips the printed-size walk, for
    values already checked when they were made."""
    kind = type(value)  # fast path first: this runs on every value the interpreter makes
    if kind is float or kind is bool or value is None:
        return value
    if (kind is int and value.bit_length() <= MAX_INT_BITS) or (kind is str and len(value) <= MAX_CHARS):
        return value
    problem = None
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        problem = f"is an integer of {value.bit_length()} bits; the limit is {MAX_INT_BITS}"
    elif isinstance(value, Fraction) and _bits(value) > MAX_INT_BITS:
        problem = f"is a fraction of {_bits(value)} bits; the limit is {MAX_INT_BITS}"
    elif isinstance(value, str) and len(value) > MAX_CHARS:
        problem = f"is a string of {len(value)} characters; the limit is {MAX_CHARS}"
    elif isinstance(value, list | tuple) and len(value) > MAX_ITEMS:
        problem = f"has {len(value)} items; the limit is {MAX_ITEMS}"
    elif isinstance(value, list | tuple) and deep and _printed_size(value) > MAX_CHARS:
        problem = f"prints as more than {MAX_CHARS} characters; the limit is {MAX_CHARS}"
    if problem is None:
        return value
    what = node if isinstance(node, str) else f"{_src(node)!r}"  # unparsed only on failure: it is slow
    raise TemplateLimitError(f"the value of {what} {problem}")


def _bits(x: Any) -> int:
    if isinstance(x, Fraction):
        return x.numerator.bit_length() + x.denominator.bit_length()
    return abs(x).bit_length() if isinstance(x, int) else 0


def _check_pow(a: Any, b: Any, node: ast.AST) -> None:
    """`a ** b` only for |b| <= MAX_EXPONENT and an exact result within MAX_INT_BITS, decided before computing it."""
    if isinstance(b, int | float | Fraction) and not isinstance(b, bool):
        if abs(b) > MAX_EXPONENT:
            raise TemplateLimitError(f"power {_src(node)} is out of range: |exponent| must be <= {MAX_EXPONENT}")
        if _bits(a) * abs(b) > MAX_INT_BITS:
            raise TemplateLimitError(f"power {_src(node)} is out of range: over {MAX_INT_BITS} bits")


def evaluate(node: ast.AST, env: dict[str, Any], functions: dict[str, Callable], _depth: int = 0) -> Any:
    """Interpret one expression; anything outside arithmetic, comparisons and the given functions is a ValueError,
    and a value or nesting past the module's limits is a TemplateLimitError (a ValueError).

    >>> evaluate(ast.parse("x * 3 // 2 + 1", mode="eval").body, {"x": 4}, {})
    7
    >>> evaluate(ast.parse("__import__('os')", mode="eval").body, {}, {})
    Traceback (most recent call last):
    ...
    ValueError: call to __import__ is not allowed
    """
    if _depth > MAX_DEPTH:
        # not unparsed: ast.unparse of the rest of a too-deep tree would itself recurse too deep
        raise TemplateLimitError(f"expression nests deeper than {MAX_DEPTH} levels (at a {type(node).__name__})")
    ev = lambda n: evaluate(n, env, functions, _depth + 1)  # noqa: E731
    match node:
        case ast.Constant(value=v) if isinstance(v, int | float | str | bool) or v is None:
            return check_size(v, node)
        case ast.Name(id=name):
            if name not in env:
                raise Unbound(name)
            return check_size(env[name], node, deep=False)  # O(1): env values were checked when made
        case ast.List(elts=elts):
            return check_size([ev(e) for e in elts], node)
        case ast.Tuple(elts=elts):
            return check_size(tuple(ev(e) for e in elts), node)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
            a, b = ev(left), ev(right)
            if isinstance(op, ast.Mult) and (isinstance(a, str | list | tuple) or isinstance(b, str | list | tuple)):
                # `n * "x"` is never arithmetic: a plain ValueError (a rejected draw), not a limit, since one real
                # template (24) multiplies by `Fraction(...)`, which gives a string; refused before anything is built
                raise ValueError(f"sequence repetition is not allowed: {_src(node)!r}")
            if isinstance(op, ast.Pow):
                _check_pow(a, b, node)
            # operands are within the limits, so one +, -, *, / builds at most twice a limit before this check
            return check_size(_BINOPS[type(op)](a, b), node)
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
            return check_size(functions[name](*[ev(a) for a in args]), node)
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


def _round(x: Any, ndigits: int | None = None) -> Any:
    """`round`, with |ndigits| <= MAX_ROUND_DIGITS."""
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
        raise TemplateLimitError(f"round(..., {ndigits}): |ndigits| must be <= {MAX_ROUND_DIGITS}")
    return round(x) if ndigits is None else round(x, ndigits)


def _list(x: Any = ()) -> list:
    """`list`, refusing before it builds more than MAX_ITEMS items."""
    if hasattr(x, "__len__") and len(x) > MAX_ITEMS:
        raise TemplateLimitError(f"list(...) of {len(x)} items; the limit is {MAX_ITEMS}")
    return list(x)


def _n_items(r: range, what: str) -> range:
    """`r` itself when it holds at most MAX_ITEMS numbers (checked in O(1), before anything is built)."""
    n = max(0, -((r.start - r.stop) // r.step))  # len(r) without len(): that overflows past sys.maxsize items
    if n > MAX_ITEMS:
        raise TemplateLimitError(f"{what}({r.start}, {r.stop}, {r.step}) spans {n} numbers; the limit is {MAX_ITEMS}")
    return r


PURE: dict[str, Callable] = {
    "is_int": is_int,
    "divides": _divides,
    "ensure_int": _ensure_int,
    "int": int,
    "float": float,
    "round": _round,
    "str": str,
    "len": len,
    "list": _list,
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

    def range_list(start: int, end: int, step: int = 1) -> list:
        return list(_n_items(range(start, end, step), "range_list"))

    def range_str(start: int, end: int, step: int, words: list) -> tuple:
        span = _n_items(range(start, end + 1, step), "range_str")
        return rng.choice([(words[i - 1], i) for i in span if 0 < i <= len(words)])

    def sample_sequential(items: list, n: int) -> list:
        if n > MAX_ITEMS:
            raise TemplateLimitError(f"sample_sequential(..., {n}) asks for {n} items; the limit is {MAX_ITEMS}")
        first = rng.randrange(len(items))
        return [items[(first + j) % len(items)] for j in range(n)]

    return {
        "sample": sample,
        "range": range_,
        "range_list": range_list,
        "arange": arange,
        "range_str": range_str,
        "sample_sequential": sample_sequential,
    }
