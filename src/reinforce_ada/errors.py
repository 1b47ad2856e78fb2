"""One exception type for bad input, so callers (and the CLI) can report it without a traceback."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value, data row or argument is invalid. The message names it and what would be valid."""


class RunStopped(ConfigError):
    """A run stopped on purpose after saving a checkpoint (workers lost, updates diverging, a dead verifier). The
    message says why and how to continue; the CLI reports it without a traceback."""
