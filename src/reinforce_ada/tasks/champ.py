"""CHAMP: 270 competition-level problems with final answers (Mao et al. 2024; `champ-dataset` on PyPI, MIT).

Five categories (number theory 80, inequality 50, polynomial 50, sequence 50, combinatorics 40), each problem with a
plain-text statement `_text` and answer `_answer` (plus step solutions, hints and concepts we do not use). Far
beyond a small model: an evaluation or stretch set, scored with the `math` verifier.

`load()` reads the package's `dataset_files/v0.json` from an installed `champ_dataset`, else from the reinforce-ada
cache, else downloads the wheel once with `pip download --no-deps` (never installing it) and keeps the JSON.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
import zipfile
from pathlib import Path

from reinforce_ada.cache import default_cache_dir, download_wheel
from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

WHEEL = "champ-dataset==1.0.0"
_MEMBER = "champ_dataset/dataset_files/v0.json"


def default_path() -> Path:
    return default_cache_dir() / "champ" / "v0.json"


def fetch(dest: str | Path | None = None) -> Path:
    """Path of `v0.json` at `dest` (default under the reinforce-ada cache), downloading the wheel once."""
    dest = Path(dest) if dest is not None else default_path()
    if dest.exists():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(download_wheel(WHEEL, Path(tmp))) as z:
            dest.parent.mkdir(parents=True, exist_ok=True)
            licence = next((n for n in z.namelist() if n.endswith(".dist-info/LICENSE")), None)
            if licence:
                (dest.parent / "LICENSE").write_bytes(z.read(licence))
            part = dest.with_suffix(".part")
            part.write_bytes(z.read(_MEMBER))
            part.replace(dest)  # atomic: an interrupted fetch leaves no truncated JSON behind
    return dest


def find() -> Path:
    """`v0.json` of an installed `champ_dataset`, else the cached copy (fetched if missing)."""
    spec = importlib.util.find_spec("champ_dataset")
    if spec is not None and spec.origin is not None:
        installed = Path(spec.origin).parent / "dataset_files" / "v0.json"
        if installed.exists():
            return installed
    return fetch()


def load(path: str | Path | None = None) -> list[Prompt]:
    """CHAMP problems as prompts: id = the problem's identifier, `meta["category"]` its category.

    `path` is a CHAMP JSON (`{"problems": {id: {"_text": ..., "_answer": ...}}}`); None finds or fetches it.
    """
    p = Path(path) if path is not None else find()
    if not p.exists():
        raise ConfigError(f"CHAMP file {p} does not exist")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p} is not valid JSON ({e.msg} at line {e.lineno})") from None
    problems = data.get("problems") if isinstance(data, dict) else None
    if not isinstance(problems, dict) or not problems:
        raise ConfigError(f"{p} has no 'problems' table of CHAMP problems")
    prompts = []
    for pid, row in problems.items():
        for key in ("_text", "_answer"):
            if not isinstance(row, dict) or not str(row.get(key) or "").strip():
                raise ConfigError(f"{p}: problem {pid!r} has no {key!r} (or it is empty)")
        meta = {"category": row.get("category", "")}
        prompts.append(Prompt(id=str(pid), text=row["_text"].strip(), answer=str(row["_answer"]).strip(), meta=meta))
    return prompts
