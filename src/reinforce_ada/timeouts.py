"""Calls with a wall-clock limit, on daemon threads: a verifier that hangs costs its reward, never the run's exit.

A Python thread cannot be killed. `call(fn, *args, timeout_s=...)` runs `fn` on one of a set of daemon worker
threads and raises `TimeoutError` when it is late; the late call keeps its thread (it is abandoned, not stopped) and
later calls start fresh threads instead of queueing behind it. Daemon threads do not hold the interpreter
at exit (`concurrent.futures.ThreadPoolExecutor` joins its threads at exit, so one hung call kept a finished run
alive for good). At most `MAX_STUCK` calls may be stuck at once; past that a call fails at once with a message
saying so, instead of starting threads without end. CPU-bound work that needs a hard limit belongs in a process
(the math verifier's pool, the code sandbox, user verifiers' workers in `tasks.user_verifier`). Here: our own
linear-time verifiers when `task.verifier_timeout_s` is set, and `sampling.ledger.score`'s optional limit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

MAX_STUCK = 64
"""Abandoned (timed-out, still running) calls allowed at once."""


class _Workers:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.stuck = 0

    def submit(self, fn: Callable[..., Any], args: tuple) -> Future:
        fut: Future = Future()
        with self._lock:
            if self.stuck >= MAX_STUCK:
                raise RuntimeError(
                    f"{self.stuck} calls ran past their time limit and are still running (threads cannot be "
                    "stopped); refusing more: the function hangs on most inputs"
                )
            if self._idle == 0:
                threading.Thread(target=self._work, name="bounded-call", daemon=True).start()
            else:
                self._idle -= 1  # reserve the idle worker for this job
        self._jobs.put((fut, fn, args))
        return fut

    def _work(self) -> None:
        while True:
            fut, fn, args = self._jobs.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # handed to the caller, who decides
                    fut.set_exception(e)
            with self._lock:
                if getattr(fut, "abandoned", False):
                    self.stuck -= 1
                self._idle += 1

    def abandon(self, fut: Future) -> None:
        """Count `fut`'s call as stuck; its thread is not idle, so the next call starts a fresh one."""
        with self._lock:
            if not fut.done():
                fut.abandoned = True  # type: ignore[attr-defined]
                self.stuck += 1


_WORKERS = _Workers()


def call(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """`fn(*args)`, or TimeoutError when it takes longer than `timeout_s` seconds (the call is abandoned)."""
    fut = _WORKERS.submit(fn, args)
    try:
        return fut.result(timeout=timeout_s)
    except FutureTimeout:
        _WORKERS.abandon(fut)
        raise TimeoutError(f"{getattr(fn, '__name__', 'the call')} took longer than {timeout_s} s") from None


def bounded(fn: Callable[..., Any], timeout_s: float) -> Callable[..., Any]:
    """`fn` with a wall-clock limit on every call (see `call`); keeps `fn`'s name and records the limit."""

    def limited(*args: Any) -> Any:
        return call(fn, *args, timeout_s=timeout_s)

    limited.__name__ = getattr(fn, "__name__", "bounded")
    limited.__wrapped__ = fn  # type: ignore[attr-defined]
    limited.timeout_s = timeout_s  # type: ignore[attr-defined]
    return limited
