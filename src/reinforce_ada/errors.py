"""One exception type for bad input, so callers (and the CLI) can report it without a traceback."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value, data row or argument is invalid. The message names it and what would be valid."""
