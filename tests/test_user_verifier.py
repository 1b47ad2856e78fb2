"""Hostile or broken user verifiers (`module:function`) cost a counted error, never the run: a CPU spin is killed at
the limit, BaseExceptions and exits are errors, only real finite numbers are rewards, and a verifier that hangs on
every call fails fast after a few timeouts instead of costing its limit on every sample."""

from __future__ import annotations

import doctest
import textwrap
import time

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.tasks import user_verifier, verifiers
from reinforce_ada.tasks.user_verifier import UserVerifier, VerifierError
from reinforce_ada.types import Prompt, Sample

HOSTILE = """
import os
import sys
import time


def spin(completion, answer):
    while True:
        pass


def sleeps(completion, answer):
    time.sleep(3600)


def interrupts(completion, answer):
    raise KeyboardInterrupt


def base_exception(completion, answer):
    raise BaseException("not an Exception")


def text(completion, answer):
    return "1.0"


def nothing(completion, answer):
    return None


def nan(completion, answer):
    return float("nan")


def exits(completion, answer):
    if completion == "exit":
        sys.exit(0)
    if completion == "_exit":
        os._exit(0)
    return 1.0


def numpy_float(completion, answer):
    import numpy as np

    return np.float64(0.5)


def flag(completion, answer):
    if os.path.exists(answer):  # the answer names a file: hang while it exists
        time.sleep(3600)
    return 1.0
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = tmp_path_factory.mktemp("verifiers") / "hostile.py"
    path.write_text(textwrap.dedent(HOSTILE))
    made: list[UserVerifier] = []

    def make(fn: str, timeout_s: float = 5.0, **kwargs) -> UserVerifier:
        made.append(UserVerifier(f"{path}:{fn}", timeout_s, **kwargs))
        return made[-1]

    yield make
    for v in made:
        v.close()


def test_doctests():
    assert doctest.testmod(user_verifier).failed == 0


@pytest.mark.slow
def test_a_cpu_spin_is_killed_at_the_limit_and_counted(hostile):
    spin = hostile("spin", 0.3)
    prompts = {"p": Prompt("p", "q", "a")}
    samples = [Sample("p", "x"), Sample("p", "y")]
    t0 = time.perf_counter()
    assert score(samples, prompts, spin) == 2 and [s.reward for s in samples] == [0.0, 0.0]
    assert time.perf_counter() - t0 < 10  # each call: a worker start (not charged) + 0.3 s, not forever
    assert spin.stats.timeouts == 2


@pytest.mark.parametrize(
    "fn, message",
    [
        ("interrupts", "raised KeyboardInterrupt"),
        ("base_exception", "raised BaseException"),
        ("text", r"returned a str \('1.0'\); a reward must be an int, float or bool"),
        ("nothing", "returned a NoneType"),
        ("nan", "returned nan"),
    ],
)
def test_base_exceptions_and_non_rewards_are_counted_errors(hostile, fn, message):
    v = hostile(fn)
    with pytest.raises(VerifierError, match=message):
        v("c", "a")
    samples = [Sample("p", "c")]
    assert score(samples, {"p": Prompt("p", "q", "a")}, v) == 1 and samples[0].reward == 0.0
    assert v.stats.errors == 2


def test_numbers_of_other_types_are_rewards(hostile):
    assert hostile("numpy_float")("c", "a") == 0.5


@pytest.mark.parametrize("how", ["exit", "_exit"])
def test_a_verifier_that_exits_is_a_counted_error_and_the_caller_goes_on(hostile, how):
    v = hostile("exits")
    samples = [Sample("p", how), Sample("p", "fine"), Sample("p", how), Sample("p", "fine")]
    assert score(samples, {"p": Prompt("p", "q", "a")}, v) == 2  # this process is still here to count them
    assert [s.reward for s in samples] == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.slow
def test_a_verifier_that_hangs_on_every_call_fails_fast(hostile):
    hung = hostile("sleeps", 0.2, hung_after=3, retry_after_s=60)
    samples = [Sample("p", str(i)) for i in range(40)]
    t0 = time.perf_counter()
    assert score(samples, {"p": Prompt("p", "q", "a")}, hung) == 40
    elapsed = time.perf_counter() - t0
    assert (hung.stats.timeouts, hung.stats.skipped) == (3, 37)
    assert elapsed < 10, f"{elapsed:.1f} s: the skipped calls waited"  # 40 waits would be >= 8 s plus 40 starts


@pytest.mark.slow
def test_the_breaker_tries_again_and_closes_when_the_verifier_recovers(hostile, tmp_path):
    marker = tmp_path / "down"
    marker.write_text("")
    v = hostile("flag", 0.2, hung_after=2, retry_after_s=0.5)
    for _ in range(2):
        with pytest.raises(TimeoutError, match="longer than 0.2 s"):
            v("c", str(marker))
    with pytest.raises(TimeoutError, match="skipped"):
        v("c", str(marker))
    marker.unlink()
    time.sleep(0.6)
    assert v("c", str(marker)) == 1.0  # the probe call gets through and closes the breaker
    assert v("c", str(marker)) == 1.0
    assert (v.stats.timeouts, v.stats.skipped) == (2, 1)


def test_build_runs_user_verifiers_in_worker_processes(hostile, tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def fine(completion, answer):\n    return completion == answer\n")
    v = verifiers.build(f"{path}:fine", timeout_s=2.0)
    assert isinstance(v, UserVerifier) and v.timeout_s == 2.0
    assert (v("4", "4"), v("4", "5")) == (1.0, 0.0)
    v.close()


def test_a_verifier_whose_worker_cannot_start_fails_the_build(tmp_path):
    """Importing the module works here but not in a fresh worker process (it needs this process's state)."""
    path = tmp_path / "needs_parent.py"
    path.write_text(
        "import sys\n\nif 'pytest' not in sys.modules:\n    raise RuntimeError('only in the parent')\n\n\n"
        "def fn(completion, answer):\n    return 1.0\n"
    )
    with pytest.raises(ConfigError, match="could not be loaded in its worker process.*only in the parent"):
        UserVerifier(f"{path}:fn", 1.0)
