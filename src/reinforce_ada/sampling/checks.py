"""The checks every strategy's options run in `__post_init__`: each message names the option, the value and what is
valid. Public for options classes from outside the package (`from reinforce_ada.sampling.options import at_least`
works too: `options` re-exports them)."""

from __future__ import annotations

import numbers
from typing import Any

from reinforce_ada.cpu_load import usable_memory
from reinforce_ada.errors import ConfigError


def of_type(name: str, value: Any, typ: str) -> None:
    """A Python value against its field's declared type (`int`, `float | None`, ...: `options.type_name`), so a value
    of the wrong kind from the Python API is an error here, not a TypeError deep in a step (the CLI, TOML and arm
    specs convert text first: `options.coerce_value`). An int is a float; a bool is neither."""
    if value is None:
        if "None" not in typ:
            raise ConfigError(f"{name}=None is not valid; expected {typ}")
        return
    base = typ.split("|")[0].strip()
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = {
        "bool": isinstance(value, bool),
        "int": number and isinstance(value, numbers.Integral),
        "float": number,
        "str": isinstance(value, str),
    }.get(base, True)
    if not ok:
        whole = "; write a whole number" if base == "int" else ""
        raise ConfigError(f"{name}={value!r} is not of type {typ} (it is a Python {type(value).__name__}){whole}")


def choice(name: str, value: Any, valid: tuple[str, ...] | list[str]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid; choose one of {list(valid)}")


def at_least(name: str, value: Any, lo: float) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < lo:
        raise ConfigError(f"{name}={value!r} is out of range; it must be >= {lo}")


def unit(name: str, value: float, *, open_lo: bool = False, open_hi: bool = False) -> None:
    lo_ok = value > 0.0 if open_lo else value >= 0.0
    hi_ok = value < 1.0 if open_hi else value <= 1.0
    if not (lo_ok and hi_ok):
        lo, hi = "(0" if open_lo else "[0", "1)" if open_hi else "1]"
        raise ConfigError(f"{name}={value!r} is out of range; it must be in {lo}, {hi}")


def positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name}={value} is out of range; it must be > 0")


def check_group(n: int, max_samples: int) -> None:
    """A strategy that trains on n of at most max_samples samples needs n <= max_samples."""
    at_least("max_samples", max_samples, 1)
    if n > max_samples:
        raise ConfigError(f"n={n} must be <= max_samples={max_samples} (cannot train on more than is drawn)")


def fits_memory(name: str, value: Any, bytes_each: int, what: str) -> None:
    """An option whose value sizes memory (`bytes_each` per unit) must fit the memory this process can get: 10**9 used
    to fail with MemoryError minutes into a run. The training config checks again with the batch size."""
    memory = usable_memory()
    if isinstance(value, int) and value * bytes_each > memory:
        raise ConfigError(
            f"{name}={value}: {what} would need about {value * bytes_each / 2**30:.0f} GiB, more than the "
            f"{memory / 2**30:.1f} GiB this process can get; the largest {name} here is {memory // bytes_each}"
        )


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} is not valid; it must be true or false")
