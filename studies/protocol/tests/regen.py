"""What every study's regeneration test checks: each result regenerated from the records equals the committed one."""

from __future__ import annotations

import json
from pathlib import Path


def same_as_committed(out: Path, committed: Path, names: list[str]) -> None:
    """Each `NAME.json` in `out` equals the committed one value for value (parsed), and its figure was drawn."""
    for name in names:
        new, old = json.loads((out / name).read_text()), json.loads((committed / name).read_text())
        assert new == old, name
        png = (out / name).with_suffix(".png")
        assert not (committed / png.name).exists() or png.stat().st_size > 0, png
