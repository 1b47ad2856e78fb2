"""The run folder's promises, kept by the library and checked in one place (`open_run_dir`, once per run).

1) Never mix two runs: a folder whose `config.toml` defines another run (any field outside `RESUME_MAY_CHANGE`
   differs) is refused; a folder that already holds steps is trained on only after `Trainer.resume()` (CLI:
   `--resume`), never started over on top of them.
2) A resume cannot change what defines the run (the same check: only how long, how often and where it runs may).
3) Nothing is written or deleted outside the folder: a symlink anywhere inside it is refused up front (a folder
   prepared by someone else could point `checkpoints/` or `config.toml` anywhere), and every write while the run
   goes passes one gate (`training.gate.Folder`: each path walked from the folder's descriptor without following
   links, at each open), so a link made mid-run is refused too.
4) One trainer at a time: `RunLock` holds `fcntl.flock` on `<run>/.lock` for the run's life; a second trainer on
   the folder gets an error naming the folder and the holder's pid.
5) A folder that cannot be written (read-only file system, permissions) is an error up front, not a TensorBoard
   traceback mid-run.
6) The checks run once: `Trainer(cfg)` runs `open_run_dir`; the CLI runs `open_run` (the same checks, and the
   default folder's numeric suffix) before torch is imported and hands the lock to `Trainer(cfg, lock=...)`.
7) Which checkpoints the folder holds is its rule too: `checkpoint_dir`, `complete` (written to the end, newest
   first), `latest` and `reached_step` live here; `training.checkpoint` writes, verifies and loads them (it imports
   this module, never the reverse).
8) The run's inputs are trusted by content: their digests are recorded when it starts and compared on resume
   (`training.inputs`); the trackers' records (`trackers.json`) are checked before anything loads
   (`training.tracker_state`): a store they name lies inside the folder, or is the one the environment names.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import warnings
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.training import inputs, tracker_state
from reinforce_ada.training.gate import Folder
from reinforce_ada.training.gate import append_line as append_line  # the gate's; importable here as before
from reinforce_ada.training.gate import write_file as write_file
from reinforce_ada.training.paths import LOCAL_PATHS, VERIFIER, file_part, local_paths, moved_paths, same_path

LOCK = ".lock"
MANIFEST = "manifest.json"
"""A checkpoint's list of its files' sha256 and its step: written last, so a checkpoint without one is incomplete."""

RESUME_MAY_CHANGE = {
    "run": (
        "steps",
        "eval_every",
        "eval_samples",
        "save_every",
        "keep_checkpoints",
        "progress",
        "run_dir",
        "max_verifier_error_share",
        "samples_per_step",
        "report_to",
    ),
    "model": ("threads", "device"),
    "task": ("verifier_timeout_s",),
    "rollout": ("address", "cpus_per_worker", "gpus_per_worker", "threads", "timeout_s", "max_restarts", "local_cpus"),
}
"""Fields a resumed run may change: how long, how often it evaluates and saves, where it runs, when it gives up on a
failing verifier. Anything else would make the folder hold two different runs."""


def changed_run_fields(saved: Any, new: Any) -> list[str]:
    """`section.field: old -> new` for every field that defines the run and differs between the two configs. Local
    paths compare as paths (`paths.same_path`), and one whose recorded file no longer exists may be given its new
    place (`paths.moved_paths`)."""
    paths = {f"{s}.{n}" for s, n in (*LOCAL_PATHS, VERIFIER)}
    moved = {field for field, _, _ in moved_paths(saved, new)}
    out = []
    for sec in dataclasses.fields(saved):
        a, b = getattr(saved, sec.name), getattr(new, sec.name)
        if not dataclasses.is_dataclass(a):
            continue
        if sec.name == "strategy":  # flat, as config.toml holds it: the name, then the strategy's options
            va_, vb_ = a.to_dict(), b.to_dict()
            pairs = [(k, va_.get(k), vb_.get(k)) for k in dict.fromkeys([*va_, *vb_]) if k != "seed"]
        else:
            pairs = [(f.name, getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)]
        for name, va, vb in pairs:
            if name in RESUME_MAY_CHANGE.get(sec.name, ()):
                continue
            if f"{sec.name}.{name}" in paths and (same_path(va, vb) or f"{sec.name}.{name}" in moved):
                continue
            if va != vb and not (isinstance(va, float) and isinstance(vb, float) and va != va and vb != vb):
                out.append(f"{sec.name}.{name}: {va!r} -> {vb!r}")
    return out


def holds_steps(run_dir: Path) -> bool:
    """Whether the folder holds a run's work: a metrics line or a checkpoint."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.jsonl"
    has_lines = metrics.is_file() and metrics.stat().st_size > 0
    return has_lines or any(checkpoint_dir(run_dir).glob("step_*"))


def check_no_links(run_dir: Path) -> None:
    """Refuse a symlink anywhere inside the run folder (the folder itself may be one: the user chose it)."""
    run_dir = Path(run_dir)
    for root, dirs, files in os.walk(run_dir, followlinks=False):
        for name in dirs + files:
            p = Path(root) / name
            if p.is_symlink():
                raise ConfigError(
                    f"{p} is a symbolic link (to {os.readlink(p)}); a run folder must not hold links, because the "
                    "trainer would write or delete files wherever they point. Remove the link, or start a new run "
                    "in another folder"
                )


def check_saved_config(run_dir: Path, cfg: Any) -> None:
    """A folder whose config.toml defines another run is refused, naming every field that differs."""
    from reinforce_ada.training.config import load_toml

    saved_path = Path(run_dir) / "config.toml"
    if not saved_path.exists():
        return
    saved = load_toml(saved_path)
    changed = changed_run_fields(saved, cfg)
    if changed:
        raise ConfigError(
            f"run folder {run_dir}: these fields define the run and differ from its config.toml: {'; '.join(changed)}"
            ". Resume with the run's own settings (only run.steps, eval/save frequency, threads and device may "
            "change), or start a new run in another folder (--run-dir, run.run_dir)"
        )
    for section, name, value in local_paths(cfg):  # a model id is no local folder: model.path is not checked
        where = Path(file_part(value))
        if section == "model" or where.exists():
            continue
        flag = "--prior-file" if name == "prior_file" else f"--{section}.{name}"
        why = (
            f"is relative to the directory the run started in and does not exist from here ({Path.cwd()}): resume "
            "from that directory, or give its place"
            if not where.is_absolute()
            else "does not exist (moved?): give its new place"
        )
        raise ConfigError(f"run folder {run_dir}: {section}.{name}={value!r} {why} ({flag} PATH)")
    checked = holds_steps(run_dir) and inputs.check(run_dir, cfg)  # a resume: every input has its recorded digest
    for field, old, value in moved_paths(saved, cfg):
        same = (
            "it has the sha256 the run recorded"
            if checked
            else "it must be the same file: this folder records no digests"
        )
        warnings.warn(f"{field}: the run's {old} no longer exists; it resumes with {value} ({same})", stacklevel=1)


def refuse_fresh_start(run_dir: Path) -> None:
    """The error for training from step 0 in a folder that already holds steps (no resume was asked for)."""
    raise ConfigError(
        f"run.run_dir={str(run_dir)!r} already holds a run; resume it (reinforce-ada train --resume {run_dir}, or "
        "Trainer.resume() before fit()) or choose a new --run-dir"
    )


def fresh_run_dir(cfg: Any, *, explicit: bool, resume: bool) -> Any:
    """Never mix two runs in one folder: the default folder gets a numeric suffix, an explicit one is an error."""
    run_dir = Path(cfg.run.run_dir)
    if resume or not used(run_dir, cfg):
        return cfg
    if explicit:
        if not holds_steps(run_dir):
            check_saved_config(run_dir, cfg)  # names the fields of the other run's config
        refuse_fresh_start(run_dir)
    i = 1
    while used(run_dir.with_name(f"{run_dir.name}-{i}"), cfg):
        i += 1
    new = run_dir.with_name(f"{run_dir.name}-{i}")
    print(f"{run_dir} already holds a run: writing to {new}")
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, run_dir=str(new)))


def used(run_dir: Path, cfg: Any) -> bool:
    """Whether a fresh run cannot start in the folder: it holds steps, or another run's config."""
    if holds_steps(run_dir):
        return True
    try:
        check_saved_config(run_dir, cfg)
    except ConfigError:
        return True
    return False


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def complete(run_dir: Path) -> list[Path]:
    """The run's checkpoints that were written to the end, newest first (`latest` first when it names one)."""
    root = checkpoint_dir(run_dir)
    done = sorted(
        (p for p in root.glob("step_*") if p.is_dir() and ((p / MANIFEST).exists() or (p / "state.pt").exists())),
        reverse=True,
    )
    marker = root / "latest"
    if marker.exists():
        named = root / marker.read_text().strip()
        if named in done:
            done.remove(named)
            done.insert(0, named)
    return done


def latest(run_dir: Path) -> Path | None:
    found = complete(run_dir)
    return found[0] if found else None


def reached_step(run_dir: Path) -> int | None:
    """The step of the folder's newest complete checkpoint (as its manifest records it), else None."""
    ckpt = latest(run_dir)
    if ckpt is None:
        return None
    try:
        return int(json.loads((ckpt / MANIFEST).read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


class RunLock:
    """`fcntl.flock` on `<run>/.lock`, held until `release()` (or the process ends): one trainer per run folder."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK
        self.fd: int | None = None
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise ConfigError(not_writable(Path(run_dir), e)) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            self.fd = None
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise ConfigError(f"run folder {run_dir}: cannot lock {self.path} ({e.strerror})") from None
            raise ConfigError(
                f"run folder {run_dir} is in use by another trainer (pid {holder}); wait for it to finish or stop "
                "it. Two trainers on one folder would interleave their metrics and checkpoints"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        try:
            self.release()
        except (AttributeError, TypeError, OSError):  # at interpreter exit fcntl/os may be gone; the OS frees it
            pass


def not_writable(run_dir: Path, e: OSError) -> str:
    why = {errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied"}.get(
        e.errno or 0, e.strerror or str(e)
    )
    return f"run folder {run_dir} cannot be written ({why}); the trainer writes its metrics and checkpoints there"


def open_run_dir(cfg: Any) -> RunLock:
    """Check the folder's promises before anything is loaded or written; returns the lock the trainer holds.

    Order: the folder is created (an error if it cannot be), links inside it are refused, another run's config, an
    input whose digest changed and a tracker store outside the folder are refused, then the lock is taken (a
    read-only folder fails here, up front) and a fresh run's input digests are recorded."""
    run_dir = Path(cfg.run.run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(not_writable(run_dir, e)) from None
    if not run_dir.is_dir():
        raise ConfigError(f"run.run_dir={str(run_dir)!r} is not a folder")
    check_no_links(run_dir)
    check_saved_config(run_dir, cfg)
    tracker_state.check(run_dir, cfg.run.report_to)  # a store trackers.json names lies in the folder, or is refused
    lock = RunLock(run_dir)
    if not os.access(run_dir, os.W_OK):
        lock.release()
        raise ConfigError(not_writable(run_dir, OSError(errno.EACCES, "permission denied")))
    if not holds_steps(run_dir) or inputs.read(run_dir) is None:  # a fresh start, or a folder older than digests
        folder = Folder(run_dir)
        try:
            inputs.record(folder, cfg)
        except BaseException:
            lock.release()
            raise
        finally:
            folder.close()
    return lock


@dataclasses.dataclass
class OpenRun:
    """A run folder opened by `open_run`: the config that runs there, the lock held, the step of its newest complete
    checkpoint (None: none), and whether `open_run` made the folder."""

    cfg: Any
    lock: RunLock
    reached: int | None
    created: bool


def open_run(cfg: Any, *, explicit: bool, resume: bool) -> OpenRun:
    """The folder a run starts or resumes in, checked once and locked (module docstring, 6): a fresh run never lands
    on another run's folder (`fresh_run_dir`: the default folder gets a numeric suffix, an explicit one is an
    error), then `open_run_dir`'s checks."""
    cfg = fresh_run_dir(cfg, explicit=explicit, resume=resume)
    created = not Path(cfg.run.run_dir).exists()
    lock = open_run_dir(cfg)
    return OpenRun(cfg, lock, reached_step(Path(cfg.run.run_dir)), created)
