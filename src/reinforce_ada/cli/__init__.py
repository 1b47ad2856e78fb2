"""The `reinforce-ada` command line (the top layer: it may import every other folder; nothing imports it).

`main` parses (`cli.main`: one loop over `COMMANDS`) and dispatches to the command bodies. Each command is one
module declaring its flags beside its body (`add_parser` and `cmd_*`: `cli.train`, `cli.plan`, `cli.simulate`,
`cli.evaluate`, `cli.filter`, `cli.compare`, `cli.features`, `cli.samples`, `cli.models`); the flags generated from
the config dataclasses are `cli.flags`, and what `--help` shows is `cli.help`.
"""

from __future__ import annotations

from reinforce_ada.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
