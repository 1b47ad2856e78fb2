"""User verifiers (`package.module:function`, `path/to/file.py:function`): loaded, checked, and run where they can be
killed.

Interface (unchanged): `fn(completion: str, answer: str) -> reward`. A reward must be an int, float or bool, or any
other `numbers.Real` scalar (numpy's included), and finite; anything else (the string "1.0", None, a list, NaN,
inf) is a verifier error naming the type, scored 0 and counted, never coerced.

`load(name)` imports the function in this process, once, to check it now (a ConfigError names what is wrong).
`UserVerifier(name, timeout_s)` is what a run calls: each call goes to a worker process (spawned, not forked: the
trainer has threads) that imported the function itself, with a wall-clock limit. So, unlike a thread, a verifier
that spins the CPU (`while True: pass`) is stopped: at the limit its worker is killed (and replaced at the next
call) and the call raises TimeoutError. Whatever the function raises, `KeyboardInterrupt`, `SystemExit` and other
BaseExceptions included, is a verifier error; so is `os._exit` or a crash of the worker (the run goes on: a fresh
worker starts at the next call). The worker ignores SIGINT (Ctrl-C stops the trainer at a step boundary, not a
reward) and ends within a second of its parent's death. One worker starts when the verifier is built (a verifier
that cannot start in a worker is a ConfigError then), more on demand, one per concurrent caller; a start (importing
your module) is not charged to a call's limit.

Fail fast on a verifier that hangs: after `hung_after` calls in a row ran past the limit, calls fail at once (a
TimeoutError saying so, counted as a verifier error like a timeout) for `retry_after_s` seconds; then one call is
tried again with the full limit, and a call that returns, whatever it returns, closes the breaker. A dead reward
service therefore costs `hung_after` limits and one limit per `retry_after_s`, not one limit per sample; the run's
error share (`stats`, `Ledger.verifier_errors`) shows it, and the trainer can stop on it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinforce_ada import types
from reinforce_ada.errors import ConfigError

START_S = 120.0
"""Seconds a worker may take to start and import the verifier (not charged to any call)."""
HUNG_AFTER = 3
"""Timeouts in a row after which calls fail at once (the verifier is taken as hung)."""
RETRY_AFTER_S = 30.0
"""Seconds calls fail at once after `HUNG_AFTER` timeouts in a row, before one call is tried again."""
ACCEPTED = types.REWARD_TYPES


class VerifierError(RuntimeError):
    """A user verifier raised, exited, crashed or returned something that is not a reward (scored 0, counted)."""


@dataclass
class VerifierStats:
    """What a `UserVerifier` has done so far (counts of calls; read by tests and tools, summed over the run)."""

    calls: int = 0
    errors: int = 0
    """Calls that raised, returned a non-reward, or whose worker died."""
    timeouts: int = 0
    """Calls past the wall-clock limit (their worker was killed)."""
    skipped: int = 0
    """Calls failed at once while the verifier was taken as hung."""


def load(name: str) -> Callable[[str, str], Any]:
    """The user function `name` (`package.module:function` or `path/to/file.py:function`), imported and checked.

    A standard-library or built-in callable (`os:system`) is refused, so is one that cannot take two arguments.
    """
    where, _, attr = name.rpartition(":")
    if not where or not attr.isidentifier():
        raise ConfigError(f"verifier {name!r}: expected module:function or path/to/file.py:function")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ConfigError(f"verifier {name!r}: {path} is not a file")
            spec = importlib.util.spec_from_file_location(f"reinforce_ada_user_verifier_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            top = where.split(".")[0]
            if top in sys.stdlib_module_names or top in sys.builtin_module_names:
                raise ConfigError(
                    f"verifier {name!r}: {top!r} is a standard-library module; a verifier must be a function of "
                    "yours (module:function or path/to/file.py:function)"
                )
            module = importlib.import_module(where)
        fn = getattr(module, attr)
    except ConfigError:
        raise
    except (ImportError, AttributeError, OSError, SyntaxError) as e:
        raise ConfigError(f"verifier {name!r} could not be imported: {e}") from None
    if not callable(fn) or inspect.isclass(fn) or inspect.isbuiltin(fn):
        raise ConfigError(f"verifier {name!r} is not a Python function (got {type(fn).__name__})")
    try:
        inspect.signature(fn).bind("completion", "answer")
    except (TypeError, ValueError):
        raise ConfigError(f"verifier {name!r} cannot be called as {attr}(completion, answer)") from None
    return fn


def as_reward(value: Any) -> float:
    """`value` as a reward, or VerifierError naming its type (see the module docstring for what is accepted).

    >>> as_reward(True), as_reward(3), as_reward(0.5)
    (1.0, 3.0, 0.5)
    >>> as_reward("1.0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    reinforce_ada.tasks.user_verifier.VerifierError: the verifier returned a str ('1.0'); a reward must be an int...
    """
    return types.as_reward(value, VerifierError)


def _serve(name: str, conn: Any, parent: int) -> None:
    """A worker: import the verifier, then answer (completion, answer) -> ("ok", reward) | ("error", message)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    try:
        fn = load(name)
    except BaseException as e:  # deliberate: the parent reports it
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            completion, answer = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", as_reward(fn(completion, answer)))
        except VerifierError as e:
            reply = ("error", str(e))
        except BaseException as e:  # deliberate: SystemExit, KeyboardInterrupt... are the verifier's errors too
            reply = ("error", f"the verifier raised {type(e).__name__}: {e}"[:1000])
        conn.send(reply)


class _Worker:
    def __init__(self, name: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(name, child, os.getpid()), daemon=True, name="user-verifier")
        self.proc.start()
        child.close()
        if not self.conn.poll(START_S):
            self.kill()
            raise VerifierError(f"the verifier's worker process did not start within {START_S:.0f} s")
        try:
            kind, message = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise VerifierError(
                f"the verifier's worker process died while starting (exit status {self.proc.exitcode}); if you call "
                "it from a script, put the script's top-level code under `if __name__ == '__main__':`"
            ) from None
        if kind != "ready":
            self.kill()
            raise VerifierError(f"the verifier could not be loaded in its worker process: {message}")

    def call(self, completion: str, answer: str, timeout_s: float) -> tuple[str, Any] | None:
        """The worker's reply, or None past `timeout_s`; VerifierError when the worker died."""
        try:
            self.conn.send((completion, answer))
            if not self.conn.poll(timeout_s):
                return None
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(1)
            raise VerifierError(
                f"the verifier's process ended during a call (exit status {self.proc.exitcode}): did it call "
                "sys.exit/os._exit or crash?"
            ) from None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class UserVerifier:
    """A user verifier run in killable worker processes, with a wall-clock limit per call and a breaker for hangs."""

    def __init__(
        self, name: str, timeout_s: float, *, hung_after: int = HUNG_AFTER, retry_after_s: float = RETRY_AFTER_S
    ) -> None:
        where, _, attr = name.rpartition(":")
        if where.endswith(".py"):  # the worker may run elsewhere: give it the absolute path
            name = f"{Path(where).resolve()}:{attr}"
        load(name)  # fail now, with a ConfigError, rather than in every worker
        self.name, self.timeout_s = name, timeout_s
        self.hung_after, self.retry_after_s = hung_after, retry_after_s
        self.__name__ = attr
        self.stats = VerifierStats()
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._streak = 0
        self._closed_at = 0.0  # monotonic time from which calls are tried again after a hang
        try:  # one worker now: a verifier that cannot start in a worker fails the build, not every call
            self._idle.append(_Worker(name))
        except VerifierError as e:
            raise ConfigError(f"verifier {name!r}: {e}") from None

    def __call__(self, completion: str, answer: str) -> float:
        with self._lock:
            self.stats.calls += 1
            if self._streak >= self.hung_after:
                now = time.monotonic()
                if now < self._closed_at:
                    self.stats.skipped += 1
                    raise TimeoutError(
                        f"verifier {self.name!r} skipped: it ran past its {self.timeout_s} s limit on its last "
                        f"{self._streak} calls in a row; one call is tried again {self._closed_at - now:.0f} s from now"
                    )
                self._closed_at = now + self.timeout_s + self.retry_after_s  # this call probes; the others skip
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self.name)
        try:
            reply = worker.call(completion, answer, self.timeout_s)
        except VerifierError:
            self._count(errors=1, streak=0)
            worker.kill()
            raise
        except BaseException:  # Ctrl-C in this process mid-call: the worker's state is unknown, do not reuse it
            worker.kill()
            raise
        if reply is None:
            worker.kill()
            self._count(timeouts=1)
            raise TimeoutError(f"verifier {self.name!r} took longer than {self.timeout_s} s (its worker was killed)")
        with self._lock:
            self._idle.append(worker)
        kind, value = reply
        if kind != "ok":
            self._count(errors=1, streak=0)
            raise VerifierError(value)
        self._count(streak=0)
        return value

    def _count(self, *, errors: int = 0, timeouts: int = 0, streak: int | None = None) -> None:
        with self._lock:
            self.stats.errors += errors
            self.stats.timeouts += timeouts
            if streak is not None:
                self._streak = streak
            elif timeouts:
                self._streak += 1
                if self._streak >= self.hung_after:
                    self._closed_at = time.monotonic() + self.retry_after_s

    def close(self) -> None:
        """Stop the idle workers (busy ones end with their call, or with this process)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
