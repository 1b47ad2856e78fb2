"""Verifiers: answer extraction (pure, fast) and the math-verify comparison through the worker pool (marked slow)."""

from __future__ import annotations

import doctest
import importlib.util
import json
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.tasks import answers, user_verifier, verifiers
from reinforce_ada.tasks.code import CodeTest
from reinforce_ada.tasks.user_verifier import UserVerifier, VerifierError
from reinforce_ada.tasks.verifiers import extract_answer
from reinforce_ada.types import Prompt, Sample
from tests.helpers import corpus

HUGE = 1_000_000


def test_doctests():
    assert doctest.testmod(verifiers).failed == 0
    assert doctest.testmod(answers).failed == 0


@pytest.mark.parametrize(
    "name, task, answer, message",
    [
        ("code", "arithmetic", "12", "no assert, raise or call"),
        ("code", "file", "the answer is (", "not Python"),
        ("numeric", "file", "x + 1", "not a number"),
        ("numeric_marked", "file", "x + 1", "not a number"),
        ("math", "code", CodeTest("assert f() == 1", entry_point="f").to_answer(), "a code task's tests"),
    ],
)
def test_a_verifier_refuses_a_task_whose_answers_are_not_its_format(name, task, answer, message):
    with pytest.raises(ConfigError, match=f"task {task!r} cannot be scored by verifier {name!r}.*{message}") as e:
        good = "assert f(1) == 2" if name == "code" else "1"
        verifiers.fit(name, task, [("p1", good), ("p2", answer)])
    assert "prompt 'p2'" in str(e.value) and "verifiers that fit this task: [" in str(e.value)


def test_fitting_answers_pass_the_check():
    verifiers.fit("code", "file", [("p", "assert f(1) == 2"), ("q", CodeTest("check(f)", entry_point="f").to_answer())])
    verifiers.fit("numeric", "file", [("p", "1,250"), ("q", "3/4")])
    verifiers.fit("math", "gsm_symbolic", [("p", "\\frac{1}{2}")])
    verifiers.fit("exact", "code", [("p", CodeTest("assert f() == 1").to_answer())])  # reads any text
    verifiers.fit("my_module:judge", "arithmetic", [("p", "12")])  # a user verifier reads its own task's answers


@pytest.mark.parametrize(
    "completion, score",
    [
        ("7 x 8 = 56. The answer is 56. I hope this helps! Next, 7 times 9.", 1.0),  # text after the marked answer
        ("The answer is 56. (Check: 56 / 8 = 7)", 1.0),  # `numeric` reads the 7
        ("The answer is 1,250.", 0.0),  # a number, but not this one (the answer is 56)
        ("7 x 8 = 56. The answer is <number>.", 0.0),  # the request's placeholder echoed: nothing marked
        ("7 x 8 = 54, 54 + 2 = 56", 0.0),  # cut mid-working or never marked: the last number is not an answer
        ("56", 0.0),
        ("The answer is **56**.", 1.0),
        ("#### 56", 1.0),
    ],
)
def test_the_marked_numeric_verifier_scores_only_the_number_the_answer_marks(completion, score):
    assert verifiers.get("numeric_marked")(completion, "56") == score


@pytest.mark.parametrize(
    "text, want",
    [
        (r"first \boxed{1}, finally \boxed{2}", "2"),  # several boxes: the last wins
        (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{1}{\sqrt{2}}"),  # nested braces
        (r"\fbox{7}", "7"),
        (r"\boxed {x}", "x"),
        (r"\boxed{3} then \boxed{\frac{1}{", "3"),  # the last box is cut off: the last complete one
        ("48 + 24 = 72\n#### 72", "72"),
        ("#### 1,250\nsome trailing words", "1,250"),
        ("Thus, the answer is $-4.5$.", "-4.5"),
        ("The answer is: 12 apples. Done", "12 apples"),
        ("I get 3, then 4, then 1,000", "1000"),  # no marker: the last number
        ("What is 9-2? Well 9-2 is 13", "13"),
        ("", None),
    ],
)
def test_extract_answer(text, want):
    assert extract_answer(text) == want


def test_extract_answer_without_last_number_fallback():
    assert extract_answer("it is 4", last_number=False) is None
    assert extract_answer(r"it is \boxed{4}", last_number=False) == "4"


@pytest.mark.parametrize(
    "text",
    ["x" * HUGE, r"\boxed{" * (HUGE // 7), "{" * HUGE + r"\boxed{1", "1 " * (HUGE // 2), r"\boxed{" + "9" * HUGE + "}"],
)
def test_extract_answer_is_linear_on_huge_outputs(text):
    t0 = time.perf_counter()
    extract_answer(text)
    assert time.perf_counter() - t0 < 2.0


def test_get_names_a_missing_math_verify(monkeypatch):
    real = verifiers.importlib.util.find_spec
    monkeypatch.setattr(verifiers.importlib.util, "find_spec", lambda n: None if n == "math_verify" else real(n))
    with pytest.raises(ConfigError, match=r"pip install 'reinforce-ada\[math\]'"):
        verifiers.get("math")
    with pytest.raises(ConfigError, match="math-verify"):
        verifiers.make_math_verifier()


def test_a_raising_verifier_scores_zero_and_is_counted():
    def stuck(completion: str, answer: str) -> float:
        raise TimeoutError("math-verify took longer than 5 s")

    samples = [Sample(prompt_id="p", text="x"), Sample(prompt_id="p", text="y", reward=1.0)]
    assert score(samples, {"p": Prompt(id="p", text="q", answer="1")}, stuck) == 1
    assert [s.reward for s in samples] == [0.0, 1.0]


# --- through the math-verify worker pool: one pool start (about a second) for the whole module ---------------------

needs_math = pytest.mark.skipif(importlib.util.find_spec("math_verify") is None, reason="needs reinforce-ada[math]")


@pytest.fixture(scope="module")
def math():  # the pool is shared by every math verifier; close it once the module is done
    yield verifiers.get("math")
    verifiers._POOL.close()


MATH_CASES = [
    # fractions vs decimals, \frac vs \dfrac, LaTeX vs plain
    (r"so \boxed{\frac{1}{2}}", "0.5", 1.0),
    (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\frac13}", "1/3", 1.0),
    (r"The answer is $\frac{3}{4}$.", "0.75", 1.0),
    (r"\boxed{\sqrt{4}}", "2", 1.0),
    (r"\boxed{\frac{1}{3}}", "0.33", 0.0),
    # units
    (r"\boxed{5 \text{ cm}}", "5", 1.0),
    ("The side is 5 cm", "5", 1.0),
    (r"\boxed{5}", "5 cm", 1.0),
    (r"\boxed{6 \text{ cm}}", "5", 0.0),
    # sets and intervals
    (r"\boxed{\{2, 1\}}", r"\{1, 2\}", 1.0),
    (r"\boxed{[1, 2)}", "[1, 2)", 1.0),
    (r"\boxed{(1, 2)}", "[1, 2)", 0.0),
    # negative numbers
    ("#### -3", "-3", 1.0),
    (r"\boxed{3}", "-3", 0.0),
    ("so the answer is -3.", "-3", 1.0),
    # several boxes: the last one counts
    (r"maybe \boxed{1}, no: \boxed{2}", "2", 1.0),
    (r"maybe \boxed{2}, no: \boxed{1}", "2", 0.0),
    # no box: falls back to ####, "the answer is", the last number
    ("12 + 30 = 42\n#### 42", "42", 1.0),
    ("Adding them gives 1,250 in total", "1250", 1.0),
    ("no number at all", "7", 0.0),
    # an echoed question is not the answer (math-verify on the whole text would read 9-2 as 7)
    ("What is 9-2? 9-2 is 13", "7", 0.0),
    ("The answer to 9-2 only uses a digit", "7", 0.0),
    # malformed LaTeX: no crash, 0
    (r"\boxed{\frac{1}{", "0.5", 0.0),
    (r"\boxed{\sqrt{}}", "2", 0.0),
    (r"\boxed{}}}{{\left(", "1", 0.0),
    (r"\boxed{\frac{1}{2}", "2", 1.0),  # unclosed box: the last number, 2
    # the reference may itself be boxed
    (r"\boxed{4}", r"\boxed{4}", 1.0),
]


@pytest.mark.slow
@needs_math
@pytest.mark.parametrize("completion, answer, want", MATH_CASES)
def test_math_rewards(math, completion, answer, want):
    assert math(completion, answer) == want


@pytest.mark.slow
@needs_math
def test_math_without_last_number_fallback(math):
    strict = verifiers.make_math_verifier(last_number=False)
    assert strict("The side is 5 cm", "5") == 0.0
    assert strict(r"The side is \boxed{5}", "5") == 1.0


@pytest.mark.slow
@needs_math
@pytest.mark.parametrize(
    "completion", ["x" * HUGE, r"\boxed{" + "9" * HUGE + "}", r"\boxed{" * (HUGE // 7), "1+" * (HUGE // 2)]
)
def test_math_huge_outputs_are_fast(math, completion):
    t0 = time.perf_counter()
    assert math(completion, "7") == 0.0
    assert time.perf_counter() - t0 < 3.0


@pytest.mark.slow
@needs_math
def test_math_timeout_raises_then_the_pool_recovers(math):
    hasty = verifiers.make_math_verifier(timeout_s=1e-4)
    with pytest.raises(TimeoutError, match="math-verify"):
        hasty(r"\boxed{(x+1)^{2}}", "x^2+2x+1")
    assert math(r"\boxed{(x+1)^{2}}", "x^2+2x+1") == 1.0  # a fresh pool (workers restarted)


@pytest.mark.slow
@needs_math
def test_math_from_threads(math):
    # rollout.score runs verifiers in threads when task.verifier_timeout_s is set
    args = [(rf"\boxed{{{i}/2}}", str(i / 2)) for i in range(16)] + [(r"\boxed{1}", "2")]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda a: math(*a), args))
    assert got == [1.0] * 16 + [0.0]


@pytest.mark.slow
@needs_math
def test_unguarded_script_gets_a_clear_error(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("from reinforce_ada.tasks import verifiers\nprint(verifiers.get('math')(r'\\boxed{1}', '1'))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "if __name__ == '__main__':" in out.stderr


HACKS = [json.loads(line) for line in corpus("answers")["jsonl"].splitlines()]


@pytest.mark.slow
@needs_math
@pytest.mark.parametrize("case", HACKS, ids=[c["completion"] for c in HACKS])
def test_math_reward_hacks_from_the_corpus(math, case):
    assert math(case["completion"], case["answer"]) == case["reward"], case["why"]


# -- user verifier ----------------------------------------------------------------------------------------------------
# Hostile or broken user verifiers (`module:function`) cost a counted error, never the run: a CPU spin is killed at
# the limit, BaseExceptions and exits are errors, only real finite numbers are rewards, and a verifier that hangs on
# every call fails fast after a few timeouts instead of costing its limit on every sample.
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


def test_user_verifier_doctests():
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
