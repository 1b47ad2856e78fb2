"""The `reinforce-ada` command line (the top layer: it may import every other folder; nothing imports it).

`main` parses (`cli.main`, flags generated from the config dataclasses in `cli.flags`) and dispatches to the command
bodies (`cli.commands`; eval and filter in `cli.evaluate`, features in `cli.features`).
"""

from __future__ import annotations

from reinforce_ada.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
