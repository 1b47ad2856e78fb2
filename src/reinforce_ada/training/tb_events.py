"""TensorBoard's event file, written by our own writer through one descriptor (`gate.Folder`).

TensorBoard's `EventFileWriter` re-opens its file by path at every flush, so a `tensorboard/` replaced by a link
mid-run was written through to wherever the link pointed (exit 0). This writer opens `events.out.tfevents.*` once,
inside the run's `tensorboard/` (walked without following links, O_EXCL: a fresh file), and writes to that descriptor
only. Before every write it checks that the folder and the file are still the ones it made: one replaced (by a link,
or anything else) stops the run naming it (`gate.FolderChanged`). The file is what TensorBoard reads: a
`file_version` event, then one event per step holding its scalars, each framed as a TFRecord (`RecordWriter`:
length, masked CRC32C of the length, data, masked CRC32C of the data).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from reinforce_ada.training.gate import Folder, FolderChanged

_made = 0


class EventsFile:
    """One TensorBoard event file in `folder` (a `tensorboard/` the run owns), written through its descriptor."""

    def __init__(self, folder: Folder) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        global _made
        _made += 1
        self.folder = folder
        self.name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}.{_made}"
        fd = folder.open_file(self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self.file = os.fdopen(fd, "ab", buffering=0)
        self.id = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        self.records = RecordWriter(self.file)
        self.Event = Event
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def check(self) -> None:
        """The folder and the file are the ones this writer made, else FolderChanged naming what was replaced."""
        self.folder.check()
        try:
            st = os.stat(self.name, dir_fd=self.folder.fd, follow_symlinks=False)
            same = (st.st_dev, st.st_ino) == self.id
        except OSError:
            same = False
        if not same:
            raise FolderChanged(
                f"{self.folder.path / self.name} was replaced or removed while the run went on; the run stops rather "
                "than write anywhere else. Start a new run in another folder, or resume this one"
            )

    def _write(self, event: Any) -> None:
        self.records.write(event.SerializeToString())

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.check()
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=v) for tag, v in values.items()])
        self._write(self.Event(wall_time=time.time(), step=step, summary=summary))

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()
        self.folder.close()
