"""Running a registration's code: a detached worktree of the commit it names, so a long study keeps its code while
the library moves on.

A registration may name `code = "<commit>"`. Its study runs the package from a worktree of that commit (made once,
under the system temp folder) and never from this checkout: its worker processes import the package afresh, and an
edit made here while a long run goes on must not reach them. The study's own script (its bookkeeping) comes from this
checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the studies run from it: `python -m studies.NAME.run`)."""


def frozen_checkout(commit: str) -> Path:
    """A detached worktree of `commit` (made once, under the system temp folder)."""
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    if known.returncode != 0:
        raise SystemExit(f"the registered code commit {commit!r} is not in this repository")
    path = Path(tempfile.gettempdir()) / f"reinforce-ada-code-{commit[:12]}"
    if not (path / "src").exists():  # a worktree whose folder was cleared (a new machine, /tmp wiped) is pruned first
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(path), commit], cwd=ROOT, check=True)
    return path


def run_frozen(commit: str, module: str, argv: list[str], extra_env: dict[str, str] | None = None) -> int:
    """`python -m MODULE ARGV` from the repository root with the package of `commit`'s worktree first on the path."""
    frozen = frozen_checkout(commit)
    print(f"running the registered code {commit[:12]} from {frozen}", flush=True)
    env = {**os.environ, "PYTHONPATH": str(frozen / "src"), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env).returncode
