"""Verifiers: plain callables `(completion, answer) -> float` in one registry.

`get(name)` accepts a registered name or `module:function` for a user callable. Verifiers judge only the final
answer they extract, never the whole completion (a model that echoes the question would otherwise score).

The `math` verifier: 1) extract the final answer (`extract_answer`: the last `\\boxed{}`/`\\fbox{}`, else the text
after the last `####`, else "the answer is ...", else the last number); 2) compare it with the reference through
math-verify (`parse` both, `verify(gold, pred)`), which knows that `\\frac{1}{2}` = 0.5, `{1,2}` = `{2,1}` and that
"5 cm" is 5. math-verify bounds its own work with SIGALRM, which only works in a main thread, and sympy can hang on a
hostile expression; so the comparison runs in a reused worker process with a wall-clock limit, and a call that runs
past it raises `TimeoutError` (`sampling.ledger.score` turns that into reward 0 and counts it in `verifier_errors`).

math-verify's LaTeX reader stops at what it cannot read and keeps the prefix: `10**2`, `10**99`, `10<<2`, `10|2`,
`10&2` and `10)(` all parse as 10, so a model could write any of them and score against gold 10. `malformed()` rejects
an extracted answer with a programming operator (`**`, `//`, `<<`, `>>`, a bare `&`), an unpaired `|`, or brackets
that close before they open or never close (intervals such as `[0, 1)` are fine); such an answer scores 0 without
being parsed. Gold answers are not checked (they come from the dataset).
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import importlib.util
import multiprocessing
import re
import threading
import unicodedata
from collections.abc import Callable

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import arithmetic

Verifier = Callable[[str, str], float]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_ANSWER_IS = re.compile(r"answer is\s*:?\s*", re.IGNORECASE)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")

MATH_TIMEOUT_S = 5.0
"""Default wall-clock limit of one math-verify comparison, in seconds from submission (so it includes any wait for a
free worker; a comparison takes about 2 ms)."""
MATH_WORKERS = 2
"""Worker processes of the shared math-verify pool (each holds sympy: about 100 MB)."""
MAX_ANSWER_CHARS = 1000
"""An extracted answer longer than this scores 0 without being parsed (a runaway box is not an answer)."""
_MISSING_MATH = "the `math` verifier needs math-verify: pip install 'reinforce-ada[math]'"


def exact(completion: str, answer: str) -> float:
    """1.0 iff the stripped completion equals the stripped answer.

    >>> exact(" 42 ", "42")
    1.0
    """
    return 1.0 if completion.strip() == answer.strip() else 0.0


def _to_float(s: str) -> float | None:
    s = s.replace(",", "")
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            return float(num) / float(den)
        return float(s)
    except (ValueError, ZeroDivisionError):
        return None


def numeric(completion: str, answer: str, *, rel_tol: float = 1e-6) -> float:
    """1.0 iff the last number in the completion equals the answer's number within `rel_tol`.

    >>> numeric("so the total is 1,250.", "1250")
    1.0
    >>> numeric("3/4", "0.75")
    1.0
    >>> numeric("no number", "3")
    0.0
    """
    found = _NUMBER.findall(completion)
    want = _to_float(answer.strip())
    got = _to_float(found[-1]) if found else None
    if want is None or got is None:
        return 0.0
    return 1.0 if abs(got - want) <= rel_tol * max(1.0, abs(want)) else 0.0


# ---------------------------------------------------------------------------------------------------------------------
# Final-answer extraction


def _last_box(text: str) -> str | None:
    """Content of the last `\\boxed{...}`/`\\fbox{...}` whose braces balance; earlier boxes if the last is cut off."""
    starts = [m.end() - 1 for m in _BOX.finditer(text)]  # positions of the opening braces
    if not starts:
        return None
    # one pass over all braces (not one scan per box: a megabyte of unclosed boxes must stay linear)
    close_of: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            close_of[stack.pop()] = m.start()
    for start in reversed(starts):
        if start in close_of:
            return text[start + 1 : close_of[start]]
    return None


_PROGRAMMING_OPS = re.compile(r"\*\*|//|<<|>>|(?<!\\)&")


def malformed(ans: str) -> str | None:
    """Why `ans` is not a complete math answer (math-verify would read only a prefix of it), else None.

    >>> malformed("10**2"), malformed("10 | 2"), malformed("10)("), malformed("\\frac{1}{2")
    ('operator **', "an unpaired '|'", "')' before its opening bracket", 'unbalanced braces')
    >>> [malformed(a) for a in ("[0, 1)", "|-3|", "\\{1, 2\\}", "10\\%", "2^{10}", "\\left( 1, 2 \\right]")]
    [None, None, None, None, None, None]
    """
    op = _PROGRAMMING_OPS.search(ans)
    if op:
        return f"operator {op.group()}"
    plain = re.sub(r"\\[{}|]|\\[a-zA-Z]+", " ", ans)  # escaped braces/bars and commands (\left, \mid) aside
    if plain.count("|") % 2:
        return "an unpaired '|'"
    depth = braces = 0
    for ch in plain:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return f"'{ch}' before its opening bracket"
        elif ch == "{":
            braces += 1
        elif ch == "}":
            braces -= 1
            if braces < 0:
                return "unbalanced braces"
    if braces:
        return "unbalanced braces"
    if depth:
        return "an unclosed bracket"
    return None


_HEDGES = re.compile(r"\\(?:lor|vee|land|wedge|mid|cup|cap|bigvee|bigwedge|lnot|neg|oplus)(?![a-zA-Z])")


def hedged(pred: str, gold: str) -> str | None:
    """Why `pred` hedges where `gold` does not (math-verify would credit one of its alternatives), else None.

    math-verify reads `1 \\lor 2 \\lor 5` (and `\\vee`, `\\wedge`, `\\land`, `\\mid`, `\\cup`) as its last part, 5,
    and an equation as its right side, so `x = 3 = 4` and `3 = 4` both score against gold 4. So a connective the gold
    does not use, more equals signs than the gold has, or an equation between numbers alone (no variable on its left)
    is refused. A gold that is itself a disjunction or a union (`x=1 \\vee x=2`, an interval union) lets the prediction
    use the same connective, and math-verify decides.

    >>> hedged(r"1 \\lor 2 \\lor 5", "5"), hedged("x = 3 = 4", "4"), hedged("3 = 4", "4")
    ('the connective \\\\lor', 'a chain of 2 equals signs', 'an equation between numbers')
    >>> [hedged(p, g) for p, g in [("x = 4", "4"), (r"(0, 1) \\cup (2, 3)", r"(0,1) \\cup (2,3)"), ("4", "4")]]
    [None, None, None]
    """
    for hedge in _HEDGES.finditer(pred):
        if hedge.group() not in gold:
            return f"the connective {hedge.group()}"
    equals = len(re.findall(r"(?<![<>!=])=(?!=)", pred))
    if equals > max(1, len(re.findall(r"(?<![<>!=])=(?!=)", gold))):
        return f"a chain of {equals} equals signs"
    if equals == 1 and "=" not in gold:
        left = re.sub(r"\\[a-zA-Z]+", "", pred.split("=", 1)[0])
        if not re.search(r"[A-Za-z]", left):
            return "an equation between numbers"
    return None


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit (Arabic-Indic `٣`, fullwidth `３`, Devanagari, ...) as its ASCII digit
    and fullwidth ASCII forms (`＋`, `．`) as ASCII; nothing else changes (no NFKC: `x²` must not become `x2`).

    >>> ascii_digits("٣٤ + ３．５ = x²")
    '34 + 3.5 = x²'
    """
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
            continue
        digit = unicodedata.decimal(ch, None)
        if digit is not None:
            out.append(str(digit))
        elif 0xFF01 <= ord(ch) <= 0xFF5E:
            out.append(chr(ord(ch) - 0xFEE0))
        else:
            out.append(ch)
    return "".join(out)


def _clean(ans: str) -> str:
    return ans.strip().strip("$").strip().rstrip(".").strip()


def extract_answer(text: str, *, last_number: bool = True) -> str | None:
    """The final answer of a completion: last box, else after the last `####`, else "the answer is", else a number.

    >>> extract_answer(r"so \\boxed{1} then \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> extract_answer(r"\\fbox{ {a} } and \\boxed{unclosed")
    '{a}'
    >>> extract_answer("5 + 5 = 10\\n#### 10")
    '10'
    >>> extract_answer("Hence the answer is $-3$.")
    '-3'
    >>> extract_answer("What is 9-2? I think 9-2 is 13")
    '13'
    >>> extract_answer("no digits here") is None
    True
    >>> extract_answer("it is 4", last_number=False) is None
    True
    """
    boxed = _last_box(text)
    if boxed is not None:
        return _clean(boxed)
    pos = text.rfind("####")
    if pos >= 0:
        after = text[pos + 4 :].strip().splitlines()
        if after and _clean(after[0]):
            return _clean(after[0])
    said = list(_ANSWER_IS.finditer(text))
    if said:
        rest = text[said[-1].end() :].strip().splitlines()
        # up to the end of the sentence: a period followed by a space or the end (not a decimal point)
        found = re.split(r"\.(?:\s|$)", rest[0], maxsplit=1)[0] if rest else ""
        if _clean(found):
            return _clean(found)
    if last_number:
        found = _NUMBER.findall(text)
        if found:
            return found[-1].replace(",", "")
    return None


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
    "arithmetic": arithmetic.verify,
    "math": math_answer,
    "code": code_answer,
}
"""Built-in verifiers. Each bounds its own work: exact/numeric/arithmetic are linear in the completion, math runs in a
process pool with a time limit, code in a sandbox with CPU, memory and wall-clock limits."""
_REQUIRES = {"math": ("math_verify", _MISSING_MATH)}
"""Registered verifiers that need an optional package: `get` checks for it so a run fails at start, not with 0s."""

CUSTOM_TIMEOUT_S = 10.0
"""Wall-clock limit of one call of a user verifier (`module:function`) when `task.verifier_timeout_s` is unset."""


def get(name: str) -> Verifier:
    """A registered verifier, or a user's `package.module:function` / `path/to/file.py:function`, checked now.

    A user verifier must be a function of yours, callable as `fn(completion, answer)`: a standard-library or
    built-in callable (`os:system`) is refused, so is one whose signature cannot take two arguments. What it returns
    is checked on every call (`sampling.ledger.score`: not a finite number -> scored 0 and counted).
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
        return _custom(name)
    raise ConfigError(
        f"unknown verifier {name!r}; choose one of {sorted(VERIFIERS)} or give module:function or file.py:function"
    )


def _custom(name: str) -> Verifier:
    import inspect
    import sys

    where, _, attr = name.rpartition(":")
    if not where or not attr.isidentifier():
        raise ConfigError(f"verifier {name!r}: expected module:function or path/to/file.py:function")
    try:
        if where.endswith(".py"):
            from pathlib import Path

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


def build(name: str, *, timeout_s: float | None = None, sandbox: str = "auto") -> Verifier:
    """The verifier a run uses: `get(name)`, bounded in time on every call, whichever path calls it (train, eval).

    `timeout_s` set: math gets it as its process-pool limit, code keeps its sandbox limits, the others run on a
    daemon thread with that limit. Unset: built-ins keep their own bounds, a user verifier gets `CUSTOM_TIMEOUT_S`.
    A call past its limit raises TimeoutError, which the scorer turns into reward 0 and counts.
    """
    from reinforce_ada.timeouts import bounded

    if name == "math":
        get(name)
        return make_math_verifier(timeout_s=timeout_s) if timeout_s is not None else math_answer
    if name == "code":
        from reinforce_ada.tasks.code import make_code_verifier

        return make_code_verifier(sandbox=sandbox)
    fn = get(name)
    if timeout_s is not None:
        return bounded(fn, timeout_s)
    return fn if name in VERIFIERS else bounded(fn, CUSTOM_TIMEOUT_S)
