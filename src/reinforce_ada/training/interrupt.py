"""Ctrl-C at a step boundary: the first SIGINT lets the step finish and the trainer save, the second stops at once."""

from __future__ import annotations

from typing import Any


class Interrupted(Exception):
    """Ctrl-C was pressed: the run stopped at a step boundary after saving a checkpoint of `step`."""

    def __init__(self, step: int) -> None:
        super().__init__(f"interrupted at step {step}")
        self.step = step


class StopAtStepBoundary:
    """While active (main thread only), the first SIGINT asks the loop to stop after the current step; a second one
    raises KeyboardInterrupt at once (nothing is saved then)."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to stop now, unsaved)")

    def __enter__(self) -> StopAtStepBoundary:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
