"""Verifiers: plain callables `(completion, answer) -> float` in one registry.

`get(name)` accepts a registered name or `module:function` for a user callable; `build(name, ...)` is what a run
uses: every verifier bounded in time, a user's run in killable worker processes (`tasks.user_verifier`). `fit(name,
task, answers)` refuses, at build time, a verifier that cannot read a task's answers (`code` on arithmetic's "12").
Verifiers judge only the final answer they extract, never the whole completion (an echoed question would score).

The `math` verifier: 1) extract the final answer (`extract_answer`: the last `\\boxed{}`/`\\fbox{}`, else the text
after the last `####`, else "the answer is ...", else the last number); 2) compare it with the reference through
math-verify (`parse` both, `verify(gold, pred)`), which knows that `\\frac{1}{2}` = 0.5, `{1,2}` = `{2,1}` and that
"5 cm" is 5. math-verify bounds its own work with SIGALRM, which only works in a main thread, and sympy can hang on a
hostile expression; so the comparison runs in a reused worker process with a wall-clock limit, and a call that runs
past it raises `TimeoutError` (`sampling.ledger.score` turns that into reward 0 and counts it in `verifier_errors`).

The final answer's extraction and the guards against answers math-verify would misread (`10**2` read as 10, hedges
such as `1 \\lor 5`, other digit scripts) live in `tasks.answers`.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import importlib.util
import multiprocessing
import threading
from collections.abc import Callable, Sequence

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import arithmetic, reasoning, running_sums
from reinforce_ada.tasks.answers import (  # noqa: F401 (re-exported: the verifiers' public names)
    _NUMBER,
    MAX_ANSWER_CHARS,
    _clean,
    _to_float,
    ascii_digits,
    extract_answer,
    hedged,
    malformed,
    numeric,
    numeric_marked,
)

Verifier = Callable[[str, str], float]


MATH_TIMEOUT_S = 5.0
"""Default wall-clock limit of one math-verify comparison, in seconds from submission (so it includes any wait for a
free worker; a comparison takes about 2 ms)."""
MATH_WORKERS = 2
"""Worker processes of the shared math-verify pool (each holds sympy: about 100 MB)."""
_MISSING_MATH = "the `math` verifier needs math-verify: pip install 'reinforce-ada[math]'"


def exact(completion: str, answer: str) -> float:
    """1.0 iff the stripped completion equals the stripped answer.

    >>> exact(" 42 ", "42")
    1.0
    """
    return 1.0 if completion.strip() == answer.strip() else 0.0


# ---------------------------------------------------------------------------------------------------------------------
# math-verify in a worker process


def _math_verify_worker(gold: str, pred: str) -> bool:
    """Runs in a pool worker (a main thread, so math-verify's SIGALRM limits work there too)."""
    from math_verify import parse, verify

    return bool(verify(parse(f"${gold}$"), parse(f"${pred}$")))


def _warm_up() -> bool:
    return _math_verify_worker("1", "1")


def _exit_with_parent(parent: int) -> None:
    """Pool-worker initializer: end this worker within a second of its parent's death (even a SIGKILL, which gives
    the pool no chance to stop its workers)."""
    import os
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _Pool:
    """One lazily started process pool, shared by every math verifier and rebuilt after a timeout or a crash.

    Workers are spawned, not forked: the trainer has torch and rollout threads running, and forking a threaded process
    can deadlock the child on a lock another thread held. Spawned workers re-import the main script, so a script that
    calls the verifier at its top level needs the usual `if __name__ == "__main__":` guard.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._executor: cf.ProcessPoolExecutor | None = None

    def submit(self, gold: str, pred: str) -> tuple[cf.ProcessPoolExecutor, cf.Future]:
        with self._lock:
            if self._executor is None:
                self._executor = self._start()
            return self._executor, self._executor.submit(_math_verify_worker, gold, pred)

    def _start(self) -> cf.ProcessPoolExecutor:
        import os

        ex = cf.ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        )
        try:
            # start-up (interpreter, sympy, math-verify: seconds on a busy CPU) is not charged to a call's time limit
            for f in [ex.submit(_warm_up) for _ in range(self.workers)]:
                f.result(timeout=120)
        except cf.TimeoutError:
            self._kill(ex)
            raise RuntimeError("the math verifier's worker processes did not start within 120 s") from None
        except cf.process.BrokenProcessPool:
            ex.shutdown(wait=False, cancel_futures=True)
            raise RuntimeError(
                "the math verifier's worker processes failed to start; if you call it from a script, put the "
                "script's top-level code under `if __name__ == '__main__':` (workers are spawned and re-import it)"
            ) from None
        return ex

    def recycle(self, ex: cf.ProcessPoolExecutor) -> None:
        """Drop `ex` (a worker is stuck or dead) and kill its workers; the next call starts a fresh pool."""
        with self._lock:
            if self._executor is not ex:
                return  # another thread already replaced it
            self._executor = None
        self._kill(ex)

    @staticmethod
    def _kill(ex: cf.ProcessPoolExecutor) -> None:
        # ProcessPoolExecutor has no public way to stop a running task before Python 3.14's terminate_workers()
        procs = list((getattr(ex, "_processes", None) or {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.kill()

    def close(self) -> None:
        with self._lock:
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)


_POOL = _Pool(MATH_WORKERS)


def make_math_verifier(*, timeout_s: float = MATH_TIMEOUT_S, last_number: bool = True) -> Verifier:
    """A `math` verifier with its own time limit; `last_number=False` gives 0 to a completion without a marked answer.

    Raises ConfigError at build time when math-verify is not installed.
    """
    if importlib.util.find_spec("math_verify") is None:
        raise ConfigError(_MISSING_MATH)

    def math_answer(completion: str, answer: str) -> float:
        pred = extract_answer(completion, last_number=last_number)
        gold = extract_answer(answer, last_number=False) or answer.strip()
        if not pred or len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return 0.0
        pred, gold = ascii_digits(pred), ascii_digits(gold)
        if malformed(pred) or hedged(pred, gold):
            return 0.0
        executor, future = _POOL.submit(_clean(gold), pred)
        try:
            return 1.0 if future.result(timeout=timeout_s) else 0.0
        except cf.TimeoutError:
            _POOL.recycle(executor)
            raise TimeoutError(f"math-verify took longer than {timeout_s} s") from None
        except cf.process.BrokenProcessPool:
            # a worker died (killed, out of memory, or recycled by another thread's timeout): this call fails (scored
            # 0 and counted by the caller) and the next one starts a fresh pool
            _POOL.recycle(executor)
            raise

    return math_answer


def math_answer(completion: str, answer: str) -> float:
    """The `math` verifier at the default time limit (`make_math_verifier()`), built on first use.

    Raises TimeoutError when math-verify runs past `MATH_TIMEOUT_S` seconds, ConfigError without math-verify.
    """
    global _DEFAULT_MATH
    if _DEFAULT_MATH is None:
        _DEFAULT_MATH = make_math_verifier()
    return _DEFAULT_MATH(completion, answer)


_DEFAULT_MATH: Verifier | None = None


def code_answer(completion: str, answer: str) -> float:
    """The `code` verifier (`tasks.code`): model-written code run against the answer's tests in a sandbox."""
    from reinforce_ada.tasks.code import code_answer as run

    return run(completion, answer)


VERIFIERS: dict[str, Verifier] = {
    "exact": exact,
    "numeric": numeric,
    "numeric_marked": numeric_marked,
    "arithmetic": arithmetic.verify,
    "running_sums": running_sums.verify,
    "running_sums_strict": running_sums.verify_strict,
    "math": math_answer,
    "code": code_answer,
    "reasoning_gym": reasoning.verify,
}
"""Built-in verifiers. Each bounds its own work: exact/numeric(_marked)/arithmetic/running_sums(_strict) are linear in
the completion, math runs in a process pool with a time limit, code in a sandbox with CPU, memory and wall-clock limits,
reasoning_gym scores an answer of at most `MAX_ANSWER_CHARS` with the family's cheap exact scorers
(`tasks.reasoning`)."""
_REQUIRES = {
    "math": ("math_verify", _MISSING_MATH),
    "reasoning_gym": ("reasoning_gym", f"the `reasoning_gym` verifier needs reasoning-gym: {reasoning.INSTALL}"),
}
"""Registered verifiers that need an optional package: `get` checks for it so a run fails at start, not with 0s."""

# ---------------------------------------------------------------------------------------------------------------------
# Which verifier reads which answers


def _code_tests(answer: str) -> str | None:
    """Why `answer` is not test code the `code` verifier can run (None: it is)."""
    import ast

    from reinforce_ada.tasks.code import parse_answer

    try:
        tree = ast.parse(parse_answer(answer).tests)
    except (SyntaxError, ValueError):
        return "it is not Python"
    if not any(isinstance(node, ast.Assert | ast.Raise | ast.Call) for node in ast.walk(tree)):
        return "it has no assert, raise or call, so no program could fail it"
    return None


def _number(answer: str) -> str | None:
    return None if _to_float(answer.strip()) is not None else "it is not a number"


def _not_code(answer: str) -> str | None:
    from reinforce_ada.tasks.code import parse_answer

    text = answer.strip()
    return "it is a code task's tests" if text.startswith("{") and parse_answer(text).tests != text else None


def _not_envelope(answer: str) -> str | None:
    return "it is a reasoning-gym answer envelope (verifier reasoning_gym)" if reasoning.read_envelope(answer) else None


def _plain(answer: str) -> str | None:
    return _not_envelope(answer) or _not_code(answer)


_ANSWER_FORMAT: dict[str, Callable[[str], str | None]] = {
    "code": _code_tests,
    "numeric": _number,
    "numeric_marked": _number,
    "math": _plain,
    "exact": _not_envelope,
    "arithmetic": _not_envelope,
    "running_sums": running_sums.answer_format,
    "running_sums_strict": running_sums.answer_format,
    "reasoning_gym": reasoning.answer_format,
}
"""Built-in verifiers that read only some answers: why an answer is not theirs. A user verifier reads any text."""


def fit(name: str, task: str, answers: Sequence[tuple[str, str]]) -> None:
    """Raise ConfigError when verifier `name` cannot score task `task`'s answers ((prompt id, answer) pairs).

    Without it `--task.verifier code` on the arithmetic task ran each answer ("12") as a test that passes: held-out
    accuracy 1.0. A user verifier (`module:function`) is trusted to read its task's answers.

    >>> fit("code", "arithmetic", [("p1", "12")])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    reinforce_ada.errors.ConfigError: task 'arithmetic' cannot be scored by verifier 'code': ...; verifiers that fit...
    """
    check = _ANSWER_FORMAT.get(name)
    if check is None:
        return
    for pid, answer in answers:
        why = check(answer)
        if why is not None:
            fitting = [v for v in sorted(VERIFIERS) if all(_ANSWER_FORMAT.get(v, _any)(a) is None for _, a in answers)]
            raise ConfigError(
                f"task {task!r} cannot be scored by verifier {name!r}: the answer of prompt {pid!r} ({answer!r:.80}) "
                f"is not its format ({why}); verifiers that fit this task: {fitting}"
            )


def _any(answer: str) -> None:
    return None


CUSTOM_TIMEOUT_S = 10.0
"""Wall-clock limit of one call of a user verifier (`module:function`) when `task.verifier_timeout_s` is unset."""


def get(name: str) -> Verifier:
    """A registered verifier, or a user's `package.module:function` / `path/to/file.py:function`, checked now.

    A user verifier must be a function of yours, callable as `fn(completion, answer)`: a standard-library or
    built-in callable (`os:system`) is refused, so is one whose signature cannot take two arguments. For a user
    verifier this is the function itself, in this process, unbounded: runs use `build`, which runs it in a worker
    process and checks what it returns (`tasks.user_verifier`: finite int/float/bool/numbers.Real only).
    """
    if name in VERIFIERS:
        module, message = _REQUIRES.get(name, (None, ""))
        if module is not None and importlib.util.find_spec(module) is None:
            raise ConfigError(message)
        if name == "code":
            from reinforce_ada.tasks.code import require_sandbox

            require_sandbox()
        return VERIFIERS[name]
    if ":" in name:
        from reinforce_ada.tasks.user_verifier import load

        return load(name)
    raise ConfigError(
        f"unknown verifier {name!r}; choose one of {sorted(VERIFIERS)} or give module:function or file.py:function"
    )


def build(name: str, *, timeout_s: float | None = None, sandbox: str = "auto") -> Verifier:
    """The verifier a run uses: `get(name)`, bounded in time on every call, whichever path calls it (train, eval).

    `timeout_s` set: math gets it as its process-pool limit, code keeps its sandbox limits, a user verifier
    (`module:function`) gets it as the limit of its worker process (`tasks.user_verifier.UserVerifier`: killed at the
    limit, fails fast once it has hung on several calls in a row), and the other built-ins run on a daemon thread
    with that limit. Unset: built-ins keep their own bounds, a user verifier gets `CUSTOM_TIMEOUT_S`.
    A call past its limit raises TimeoutError, which the scorer turns into reward 0 and counts.
    """
    from reinforce_ada.timeouts import bounded

    if name == "math":
        get(name)
        return make_math_verifier(timeout_s=timeout_s) if timeout_s is not None else math_answer
    if name == "code":
        from reinforce_ada.tasks.code import make_code_verifier

        return make_code_verifier(sandbox=sandbox)
    if name not in VERIFIERS and ":" in name:
        from reinforce_ada.tasks.user_verifier import UserVerifier

        return UserVerifier(name, timeout_s if timeout_s is not None else CUSTOM_TIMEOUT_S)
    fn = get(name)
    return bounded(fn, timeout_s) if timeout_s is not None else fn
