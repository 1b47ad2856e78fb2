"""`trackers.json`: the run folder's record of each tracker's run, and the one place that decides where a resumed
tracker writes.

1) Locations are recorded relative to the run folder: MLflow's own store as `{"store": "mlruns"}`, never as an
   absolute URI, so a copied or moved run folder logs into its own store only (it used to log into the original
   folder's MLflow run, or re-create the old path).
2) A store outside the folder is only ever the one the environment names now (`MLFLOW_TRACKING_URI`): a record naming
   another (an edited `store` with `..` or an absolute path, a `tracking_uri` that is neither this folder's store nor
   the environment's) is refused naming the key, before the model loads (`run_dir.open_run_dir`).
3) Records written by earlier versions hold MLflow's store as an absolute `file://` URI: one naming a `mlruns`
   folder reads as this folder's own `mlruns/` when that holds the MLflow run (the folder was copied or moved there).
4) A tracker run in a store outside the folder (W&B, trackio, an MLflow server) is continued by the folder it was
   made in, or by that folder moved; a copy of a folder that still holds the run starts a tracker run of its own
   (`resumable`), rather than log the copy's steps into the original's.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from reinforce_ada.errors import ConfigError

STATE_FILE = "trackers.json"
"""The run folder's record of each tracker's run (W&B id, MLflow run id and store, trackio project and name)."""
OWN_STORE = "mlruns"
"""MLflow's file store inside the run folder, used when `MLFLOW_TRACKING_URI` names none."""


def read(run_dir: Path) -> dict[str, Any]:
    """The record, `{}` when there is none or it is damaged (new tracker runs rather than no tracking)."""
    path = Path(run_dir) / STATE_FILE
    try:
        state = json.loads(path.read_text()) if path.is_file() and not path.is_symlink() else {}
    except (OSError, ValueError, RecursionError):
        return {}
    return state if isinstance(state, dict) else {}


def _inside(rel: Any) -> bool:
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return False
    parts = Path(rel).parts
    return not Path(rel).is_absolute() and ".." not in parts and bool(parts)


def _old_own_store(run_dir: Path, uri: str, run_id: Any) -> bool:
    """An earlier version's record (`file:///.../mlruns`) of a store this folder holds a copy of (the run is in its
    mlruns/)."""
    if Path(unquote(urlparse(uri).path)).name != OWN_STORE:
        return False
    if not isinstance(run_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", run_id):
        return False
    store = Path(run_dir) / OWN_STORE
    return store.is_dir() and not store.is_symlink() and any(store.glob(f"*/{run_id}"))


def mlflow_location(run_dir: Path, resume: dict[str, Any] | None, env: str | None) -> tuple[str, str]:
    """Where MLflow writes: `("store", rel)`, this folder's own file store at `rel`, or `("uri", uri)`, the store the
    environment names (module doc). A record naming any other place is a ConfigError naming the key."""
    if not resume:
        return ("uri", env) if env else ("store", OWN_STORE)
    if "store" in resume:
        if not _inside(resume["store"]):
            raise ConfigError(
                f"run folder {run_dir}: {STATE_FILE}'s mlflow.store is {resume['store']!r}; MLflow's store is "
                f"recorded relative to the run folder and lies inside it ({OWN_STORE!r}). Put {OWN_STORE!r} back, "
                f'or remove the "mlflow" entry of {STATE_FILE} to start a new MLflow run'
            )
        return ("store", str(resume["store"]))
    uri = resume.get("tracking_uri")
    if isinstance(uri, str) and env and uri == env:
        return ("uri", uri)
    if isinstance(uri, str) and uri.startswith("file:") and _old_own_store(run_dir, uri, resume.get("run_id")):
        return ("store", OWN_STORE)
    raise ConfigError(
        f"run folder {run_dir}: {STATE_FILE}'s mlflow.tracking_uri is {uri!r}, which is neither this run folder's "
        f"own store ({OWN_STORE}/) nor the one MLFLOW_TRACKING_URI names ({env!r}); a resumed run logs only there. "
        f'To continue that MLflow run, set MLFLOW_TRACKING_URI={uri}; to start a new one, remove the "mlflow" '
        f"entry of {STATE_FILE}"
    )


def resumable(run_dir: Path, name: str, entry: Any) -> dict[str, Any] | None:
    """The record tracker `name` continues from (as its sink wrote it), or None for a new tracker run: none is
    recorded, or this folder is a copy of the one that made the run, which still holds it (module doc, 4; a note
    says so)."""
    if not isinstance(entry, dict):
        return None
    own = {k: v for k, v in entry.items() if k != "folder"}
    made_in = entry.get("folder", entry.get("name") if name == "trackio" else None)
    if (name == "mlflow" and "store" in entry) or not isinstance(made_in, str) or not Path(made_in).is_dir():
        return own  # its own store (a copy holds a copy of it), a record older than `folder`, or a move
    if os.path.samefile(made_in, run_dir):
        return own
    theirs = read(Path(made_in)).get(name)
    if not (isinstance(theirs, dict) and {k: v for k, v in theirs.items() if k != "folder"} == own):
        return own  # that folder holds another run now: this one was moved
    print(
        f"note: {run_dir} is a copy of {made_in}, which holds the {name} run this one continued; a new {name} run "
        "is started for the copy, so that its steps do not land in the original's",
        file=sys.stderr,
    )
    return None


def check(run_dir: Path, report_to: Any) -> None:
    """Before anything loads: the record's MLflow location is one a resumed run may write to (`mlflow_location`)."""
    names = {n.strip().lower() for n in str(report_to).split(",")}
    state = read(run_dir)
    if "mlflow" in names and isinstance(state.get("mlflow"), dict):
        mlflow_location(Path(run_dir), state["mlflow"], os.environ.get("MLFLOW_TRACKING_URI"))
