"""The one list of engine names: `ENGINES` (name -> class, or "module:Class" imported on first use), `register_engine`
and `engine_class`.

1) A value is a class with `capabilities = Capabilities(...)` and a classmethod `build(spec, *, model, tokenizer,
   model_path)` (`engines.protocol`), or the "module:Class" path of one. Heavy backends are registered as paths, so
   `import reinforce_ada` never imports vllm; an engine of one's own is registered as a class or a path, with one
   line: `register_engine("foo", Foo)` (checked at once) or `ENGINES["foo"] = Foo` (checked on first use).
2) A leaf: imports only the contract (`protocol`) and `errors`, so `engines.config` validates `generation.engine`
   against the live table and `engines.factory` builds from it without either importing the other.
"""

from __future__ import annotations

import importlib
import inspect
import re

from reinforce_ada.engines.protocol import Capabilities
from reinforce_ada.errors import ConfigError

ENGINES: dict[str, type | str] = {
    "hf": "reinforce_ada.engines.local:LocalEngine",
    "vllm": "reinforce_ada.engines.vllm:VLLMEngine",
}
"""Engine name -> class or "module:Class"; the class has `capabilities` and `build(spec, *, model, tokenizer,
model_path)`. `generation.engine`, `rollout.engine`, `eval --engine` and their `--help` read this table."""

RESERVED = ("auto",)
"""Names that are choices, not engines: `generation.engine = "auto"` picks hf or vllm (`engines.config`)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def register_engine(name: str, cls: type | str, *, replace: bool = False) -> type | str:
    """Make `cls` (a class, or "module:Class" imported on first use) the engine `name` everywhere: `generation.engine`,
    `rollout.engine`, `eval --engine`, `build_engine` and the contract test.

    A class is checked now (`capabilities`, classmethod `build`); registering a taken name is an error unless
    `replace=True`. Returns `cls`.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED:
        raise ConfigError(
            f"engine name {name!r} must be lower-case letters, digits and '_', starting with a letter, and not one "
            f"of {list(RESERVED)}"
        )
    if isinstance(cls, str):
        if not _PATH.fullmatch(cls):
            raise ConfigError(f"engine {name!r}: {cls!r} is not a class or a 'module:Class' path")
    else:
        check_engine(name, cls)
    taken = ENGINES.get(name)
    if taken is not None and taken != cls and not replace:
        raise ConfigError(f"engine name {name!r} is taken by {_describe(taken)}; pass replace=True")
    ENGINES[name] = cls
    return cls


def engine_class(name: str) -> type:
    """The class registered as `name` (imported if registered by path, then checked); errors name what is wrong."""
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    entry = ENGINES[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        if not _PATH.fullmatch(entry):
            raise ConfigError(f"engine {name!r}: {entry!r} is not a class or a 'module:Class' path")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"engine {name!r} ({entry}) cannot be imported: {e}") from e
    else:
        cls = entry
    check_engine(name, cls)
    return cls


def check_engine(name: str, cls: object) -> None:
    """`cls` is a class with `capabilities = Capabilities(...)` and a classmethod `build`; else a `ConfigError`."""
    if not isinstance(cls, type):
        raise ConfigError(f"engine {name!r}: {cls!r} is not a class or a 'module:Class' path")
    build = inspect.getattr_static(cls, "build", None)
    if not isinstance(getattr(cls, "capabilities", None), Capabilities) or not isinstance(
        build, (classmethod, staticmethod)
    ):
        raise ConfigError(
            f"engine {name!r} ({_describe(cls)}) must declare `capabilities = Capabilities(...)` and a classmethod "
            "`build(spec, *, model, tokenizer, model_path)` (engines/protocol.py)"
        )


def _describe(entry: object) -> str:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, type):
        return f"{entry.__module__}:{entry.__qualname__}"
    return repr(entry)
