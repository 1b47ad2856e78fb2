"""`--plugin FILE.py|MODULE`: import user code that registers extensions before the command line is parsed.

A plugin is any module whose import registers something with one line -- `register_strategy("mine", Mine)`,
`register_task(TaskSpec(...))`, `ENGINES["mine"] = MyEngine`, `register_admission("mine", MyRule)` -- so its
strategy's options become flags, its task a `--task.name`, its engine a `--generation.engine` choice. The flag may
stand anywhere on the line (`reinforce-ada --plugin my.py train ...` or `reinforce-ada train --plugin my.py ...`);
it is taken out before argparse sees the rest, because the flags themselves depend on what the plugin registers.

A plugin that fails to import is an error naming it, and so is one that calls `sys.exit` while being imported (the
command would otherwise end with status 0 having done nothing); Ctrl-C during the import (or a plugin raising
`KeyboardInterrupt`) ends the command with status 130 and one line naming the plugin (`PluginInterrupted`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from reinforce_ada.errors import ConfigError


class PluginInterrupted(KeyboardInterrupt):
    """Ctrl-C, or a `KeyboardInterrupt` the plugin raised, while `--plugin SPEC` was being imported."""

    def __init__(self, spec: str):
        super().__init__(spec)
        self.spec = spec


def _importing(spec: str, load: Callable[[], ModuleType]) -> ModuleType:
    """`load()`, with every way the user's code can end it reported with the plugin's name."""
    try:
        return load()
    except ConfigError:
        raise
    except SystemExit as e:  # sys.exit(0) at import made the command exit 0 having done nothing
        raise ConfigError(
            f"--plugin {spec} called sys.exit({e.code!r}) while being imported; a plugin registers extensions and "
            "must not exit (the command did not run)"
        ) from None
    except KeyboardInterrupt:
        raise PluginInterrupted(spec) from None
    except Exception as e:  # noqa: BLE001 - any failure of the user's code is reported with the plugin's name
        raise ConfigError(f"--plugin {spec} failed to import: {type(e).__name__}: {e}") from e


def split_plugins(argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv without any `--plugin X` / `--plugin=X`, the plugins named, in order)."""
    rest, plugins, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--plugin":
            if i + 1 >= len(argv):
                raise SystemExit("reinforce-ada: error: --plugin needs a FILE.py or a module name")
            plugins.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--plugin="):
            plugins.append(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    return rest, plugins


def load_plugin(spec: str) -> ModuleType:
    """Import a plugin: a path to a .py file (loaded under the module name of its stem) or an importable module."""
    if spec.endswith(".py") or Path(spec).suffix == ".py":
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"--plugin {spec}: no such file")
        name = f"reinforce_ada_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigError(f"--plugin {spec}: cannot be loaded as a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        loader = module_spec.loader
        try:
            return _importing(spec, lambda: (loader.exec_module(module), module)[1])
        except BaseException:
            sys.modules.pop(name, None)
            raise
    return _importing(spec, lambda: importlib.import_module(spec))


def load_plugins(specs: list[str]) -> None:
    for spec in specs:
        load_plugin(spec)
