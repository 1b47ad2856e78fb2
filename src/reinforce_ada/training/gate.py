"""One gate for every write under a run folder: `Folder`. The trainer, its trackers, checkpoints, the report and
the samples log write through it and nowhere else (`tests/test_write_gate.py` reads the package's source for writes
that bypass it).

1) A `Folder` is opened once and held by descriptor. A path below it is walked one name at a time from that
   descriptor with O_NOFOLLOW (`openat`), so a link anywhere below, made before the run or while it goes, is refused
   naming it and never followed: every write lands inside the folder, checked at each open, not once at start.
2) Files are written whole by an atomic rename (`write`: a fresh temporary file, O_EXCL, fsync, `renameat`) or
   appended (`append`: O_APPEND, O_NONBLOCK; a FIFO, socket or device is refused, never waited on).
3) `sub` opens a folder below and remembers what it is (device and inode); `check` walks to it again and fails the run
   (`FolderChanged`, naming it) when its name now holds a link or another folder. A writer that is not ours and
   writes by path (Hugging Face `save_pretrained`, safetensors, MLflow's file store) is given `writer_path`: on Linux
   `/proc/self/fd/N`, which names the folder we opened whatever is put at its name later; `refuse_links` then walks
   it by descriptor and refuses any link or non-regular file that appeared in it. TensorBoard's events are written
   by our own writer, through one descriptor (`training.tb_events`).
4) The folder's own path is the user's choice and may hold links (`/tmp` -> `/private/tmp`); below it, none.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from reinforce_ada.errors import ConfigError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
NOFOLLOW_DIR = DIR_FLAGS | os.O_NOFOLLOW


class FolderChanged(ConfigError):
    """A folder the run writes into was replaced (by a link or another folder) while it ran: the run stops rather
    than write wherever the new name points."""


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or any("\x00" in p for p in parts):
        raise ConfigError(f"{str(rel)!r} is not a path inside the run folder")
    return [p for p in parts if p != "."]


def _what(parent_fd: int, name: str) -> str:
    """What `name` is, for an error: a link (and where it points), a file, nothing."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link to {os.readlink(name, dir_fd=parent_fd)}"
    return "a folder" if stat.S_ISDIR(st.st_mode) else "not a folder"


def _link_error(where: Path, what: str) -> ConfigError:
    return ConfigError(
        f"{where} is {what}; a run folder must not hold links, because the trainer would write or delete files "
        "wherever they point. Remove the link, or start a new run in another folder"
    )


def open_dir(parent_fd: int, name: str, where: Path, *, create: bool) -> int:
    """The descriptor of folder `name` in `parent_fd`, made when `create`; a link (or a file) there is refused."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent_fd)
    try:
        return os.open(name, NOFOLLOW_DIR, dir_fd=parent_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _link_error(where, _what(parent_fd, name)) from None
        raise


class Folder:
    """A folder of the run, held by descriptor; every path below it walked without following links (module doc)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, _fd: int | None = None) -> None:
        self.path = Path(path)
        if _fd is None:
            if create:
                self.path.mkdir(parents=True, exist_ok=True)
            _fd = os.open(self.path, DIR_FLAGS)
        self.fd: int | None = _fd
        st = os.fstat(_fd)
        self.id = (st.st_dev, st.st_ino)
        self._parent: tuple[Folder, str] | None = None

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Folder({str(self.path)!r})"

    def _fileno(self) -> int:
        if self.fd is None:
            raise ValueError(f"{self.path}: the folder was closed")
        return self.fd

    @contextlib.contextmanager
    def _parent_of(self, rel: str | os.PathLike[str], *, create: bool = True) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder holding `rel`'s last name, that name), every folder on the way walked no-follow."""
        parts = _parts(rel)
        fd, opened, where = self._fileno(), [], self.path
        try:
            for name in parts[:-1]:
                where = where / name
                fd = open_dir(fd, name, where, create=create)
                opened.append(fd)
            yield fd, parts[-1]
        finally:
            for f in opened:
                os.close(f)

    def open_file(self, rel: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
        """A descriptor of the file `rel` (never through a link; a FIFO, socket or device is refused)."""
        with self._parent_of(rel) as (parent, name):
            try:
                fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=parent)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    where = self.path / rel
                    raise ConfigError(f"{where} is a symbolic link; the trainer does not write through links") from None
                if e.errno == errno.ENXIO:  # a FIFO with no reader
                    where = self.path / rel
                    raise ConfigError(f"{where} is a FIFO, not a regular file; the trainer writes only files") from None
                raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ConfigError(f"{self.path / rel} is not a regular file (a FIFO, socket or device); the trainer writes "
                              "only files")  # fmt: skip
        return fd

    def write(self, rel: str | os.PathLike[str], data: str | bytes) -> None:
        """Write `rel` whole, atomically: a fresh temporary file renamed over it (a link there is replaced, never
        written through)."""
        with self._parent_of(rel) as (parent, name):
            tmp = f".{name}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o644, dir_fd=parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)

    def append(self, rel: str | os.PathLike[str], text: str) -> None:
        fd = self.open_file(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a") as fh:
            fh.write(text)

    def sub(self, rel: str | os.PathLike[str], *, create: bool = True) -> Folder:
        """The folder `rel` below this one (made when `create`), held by descriptor; `check` re-walks to it."""
        with self._parent_of(rel, create=create) as (parent, name):
            fd = open_dir(parent, name, self.path / rel, create=create)
        out = Folder(self.path / rel, _fd=fd)
        out._parent = (self, str(rel))
        return out

    def exists(self, rel: str | os.PathLike[str]) -> bool:
        """Whether `rel` names anything (a link included), walking no-follow; a link on the way is refused."""
        with self._parent_of(rel, create=False) as (parent, name):
            try:
                os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
            return True

    def rename(self, src: str, dst: str) -> None:
        """Rename one name of this folder to another (atomic; `dst` replaced if a file or an empty folder)."""
        fd = self._fileno()
        os.rename(_parts(src)[0], _parts(dst)[0], src_dir_fd=fd, dst_dir_fd=fd)

    def remove(self, rel: str | os.PathLike[str]) -> None:
        """Remove `rel`: a file or link itself, a folder with all it holds (never following a link inside)."""
        with self._parent_of(rel, create=False) as (parent, name):
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=parent)
            else:
                os.unlink(name, dir_fd=parent)

    def names(self) -> list[str]:
        return os.listdir(self._fileno())

    @property
    def writer_path(self) -> str:
        """A path for a writer that is not ours: `/proc/self/fd/N` on Linux (it names this folder whatever is put at
        its name later), else the folder's path (then `check` and `refuse_links` are the guard)."""
        proc = f"/proc/self/fd/{self._fileno()}"
        with contextlib.suppress(OSError):
            if os.stat(proc).st_ino == self.id[1]:
                return proc
        return str(self.path)

    def check(self) -> None:
        """Fail (`FolderChanged`, naming it) when this folder's name no longer holds this folder: a link or another
        folder put in its place while the run went on. The run folder itself is found by its path (which may hold
        links the user chose); a folder below it is walked to again without following any."""
        now = self._replaced_by()
        if now is not None:
            raise FolderChanged(
                f"{self.path} was replaced while the run went on (it is now {now}); the run stops rather than write "
                "there. Put the run's folder back (or remove what replaced it) and resume, or start a new run in "
                "another folder"
            )

    def _replaced_by(self) -> str | None:
        """What this folder's name holds now when that is not this folder, else None."""
        if self._parent is None:
            try:
                st = os.stat(self.path)
            except OSError:
                return "missing"
            return None if (st.st_dev, st.st_ino) == self.id else "another folder"
        parent, rel = self._parent
        parent.check()
        try:
            with parent._parent_of(rel, create=False) as (fd, name):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    return _what(fd, name)
        except ConfigError:
            return "under a symbolic link"
        except OSError:
            return "missing"
        return None if (st.st_dev, st.st_ino) == self.id and stat.S_ISDIR(st.st_mode) else "another folder"

    def refuse_links(self) -> None:
        """Walk this folder by descriptor: a link, FIFO, socket or device anywhere in it fails the run naming it (a
        writer that is not ours might follow it)."""
        for root, dirs, files, root_fd in os.fwalk(".", dir_fd=self._fileno()):
            for name in dirs + files:
                st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    where = self.path / root / name
                    what = _what(root_fd, name) if stat.S_ISLNK(st.st_mode) else "not a regular file"
                    raise FolderChanged(
                        f"{where} is {what}, made while the run went on; the run stops rather than let a writer "
                        "follow it. Remove it, or start a new run in another folder"
                    )

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()


def write_file(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write `path` atomically without following a link at its name (`Folder.write` in its parent folder)."""
    path = Path(path)
    folder = Folder(path.parent, create=False)
    try:
        folder.write(path.name, data)
    finally:
        folder.close()


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """Append to `path`, refusing a link (ELOOP names it) and anything but a regular file (`Folder.append`)."""
    path = Path(path)
    folder = Folder(path.parent, create=False)
    try:
        folder.append(path.name, line)
    finally:
        folder.close()
