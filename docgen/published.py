"""The one door every value the generated pages publish comes through: the studies' and benchmarks' JSON (and a
registration's TOML), read whole and checked before a page is written from it.

- **Numbers** are finite and within +-`LARGEST` (NaN, Infinity or 1e308 in a result is a damaged file, not a
  measurement): anything else is a `PageDataError` naming the file and the field (`a.b[2].c`).
- **Fields**: what is read comes back as a `Doc` (a dict) or `Items` (a list) that knows its file and place, so a
  missing field (`doc["pools"]`) or a missing item is an error naming both, never a bare KeyError; a string read
  where a number is formatted (`f"{x:.2f}"`) names its field too (`Text`). What a page needs of a file's shape (a
  claim's pools, a figure's value) its page checks with `docgen.schema.check`.
- **Text** is made safe for Markdown and HTML as it is read (`safe`): no raw HTML (a `<` that would open a tag,
  comment or declaration becomes `&lt;`), no link or image (`](` is escaped), no `javascript:`/`vbscript:` URL, no
  attribute list (`{...}`, mkdocs' attr_list); dictionary keys included. Text the studies write today holds none of
  these, so the committed pages come out byte for byte as before.

Python's json reads NaN, Infinity and 1e999 (as inf) without a word, and a page formats them as "nan", "inf" or a
309-digit number: this module is where that stops. `docgen.__main__` also scans what it writes for "nan" and "inf"
(`unpublishable`), for numbers a page derives itself.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

LARGEST = 1e15
"""The largest magnitude a published number may have: no study measures more (tokens, seconds, samples); a value
beyond it is a damaged or hand-edited file."""

_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_SCHEME = re.compile(r"(?i)((?:java|vb)\s*script)\s*:")
_ATTRS = re.compile(r"\{(?=[^{}]*\})")
_NUMERIC_SPEC = re.compile(r"[bcdeEfFgGnoxX%]$|,")


class PageDataError(ValueError):
    """A value a page would publish that is not what its study writes: the message names the file and the field."""


class MissingField(PageDataError, KeyError):
    """A field a page reads that its file lacks (a KeyError too, so `in`-style fallbacks behave as before)."""

    def __str__(self) -> str:
        return str(self.args[0])


def safe(text: str) -> str:
    """`text` as Markdown that renders as the text itself: no raw HTML, link, script URL or attribute list."""
    text = _TAG.sub("&lt;", text)
    text = text.replace("](", "]\\(")
    text = _SCHEME.sub(lambda m: m.group(1) + "&#58;", text)
    return _ATTRS.sub("&#123;", text)


def where(origin: tuple[str, str], key: Any = None) -> str:
    """`FILE: field PATH` (the field's path within the file; `key` appended)."""
    path = origin[1] if key is None else _join(origin[1], key)
    return f"{origin[0]}: field {path or '(the whole file)'}"


def _join(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)


class Text(str):
    """A string read from a file: formatting it as a number (`f"{x:.2f}"`) is an error naming its field."""

    origin: tuple[str, str]

    def __format__(self, spec: str) -> str:
        if spec and _NUMERIC_SPEC.search(spec):
            raise PageDataError(f"{where(self.origin)}: {str(self)!r} is text where a number belongs")
        return str.__format__(str(self), spec)


class Doc(dict):
    """A JSON object read from a file: a missing field is a `MissingField` naming the file and the field."""

    origin: tuple[str, str]

    def __getitem__(self, key: Any) -> Any:
        try:
            return dict.__getitem__(self, key)
        except KeyError:
            raise MissingField(f"{where(self.origin, key)} is missing") from None

    def __format__(self, spec: str) -> str:
        if spec:
            raise PageDataError(f"{where(self.origin)}: an object where a number belongs")
        return dict.__repr__(self)


class Items(list):
    """A JSON array read from a file: an index past its end is a `MissingField` naming the file and the field."""

    origin: tuple[str, str]

    def __getitem__(self, i: Any) -> Any:
        try:
            return list.__getitem__(self, i)
        except IndexError:
            raise MissingField(f"{where(self.origin, i)} is missing (the list has {len(self)} items)") from None

    def __format__(self, spec: str) -> str:
        if spec:
            raise PageDataError(f"{where(self.origin)}: a list where a number belongs")
        return list.__repr__(self)


def number_ok(x: Any) -> bool:
    """A finite int or float (not a bool) within +-`LARGEST`."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and abs(x) <= LARGEST


def checked(value: Any, file: str, path: str = "", strict: bool = True) -> Any:
    """`value` (parsed JSON or TOML) as `Doc`/`Items`/`Text`, its strings made `safe`; with `strict`, a number that
    is not finite or beyond `LARGEST` is a `PageDataError` naming the file and the field."""
    if isinstance(value, dict):
        out = Doc()
        for k, v in value.items():
            out[safe(k) if isinstance(k, str) else k] = checked(v, file, _join(path, k), strict)
        out.origin = (file, path)
        return out
    if isinstance(value, list | tuple):
        items = Items(checked(v, file, _join(path, i), strict) for i, v in enumerate(value))
        items.origin = (file, path)
        return items
    if isinstance(value, str):
        t = Text(safe(value))
        t.origin = (file, path)
        return t
    if strict and isinstance(value, float | int) and not isinstance(value, bool) and not number_ok(value):
        raise PageDataError(
            f"{where((file, path))}: {value!r} is not a publishable number (finite, at most {LARGEST:g} in size); "
            "the file is damaged or was edited: regenerate it or restore it from git"
        )
    return value


def relative(path: Path) -> str:
    """`path` from the repository's root (as the pages and errors name files), else as given."""
    try:
        return Path(path).resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
    except ValueError:
        return str(path)


def load_json(path: Path) -> Any:
    """A JSON file read whole and `checked`; one that cannot be read or parsed is a `PageDataError` naming it."""
    name = relative(path)

    def constant(c: str) -> Any:
        raise PageDataError(f"{name}: holds {c}, not a number: regenerate it or restore it from git")

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PageDataError(f"{name}: cannot be read as UTF-8 text ({e})") from None
    try:
        return checked(json.loads(text, parse_constant=constant), name)
    except json.JSONDecodeError as e:
        why = "empty" if not text.strip() else f"not whole JSON ({e.msg}, line {e.lineno})"
        raise PageDataError(f"{name}: {why}: regenerate it or restore it from git") from None
    except RecursionError:
        raise PageDataError(f"{name}: nested too deeply to be a result") from None


def load_toml(path: Path) -> Any:
    """A TOML file (a registration) read and `checked` as `load_json` reads JSON."""
    name = relative(path)
    try:
        return checked(tomllib.loads(Path(path).read_text(encoding="utf-8")), name)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PageDataError(f"{name}: not a readable TOML file ({e})") from None


_UNPUBLISHABLE = re.compile(r"(?<![\w.])[-+]?(?:nan|inf|infinity)(?![\w])", re.I)


def unpublishable(name: str, lines: list[str]) -> None:
    """A `PageDataError` naming the page and line where a number came out as nan or inf (a value a page derived
    itself: a ratio over zero, a mean of nothing)."""
    for n, line in enumerate(lines, 1):
        m = _UNPUBLISHABLE.search(line)
        if m:
            raise PageDataError(f"{name}, line {n}: {m.group(0)!r} is not a number to publish: {line.strip()[:160]}")
