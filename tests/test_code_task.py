"""The code task: HumanEval and MBPP-style files as prompts, and the `code` verifier scoring completions in a sandbox.

The verifier tests need a working sandbox tool (bubblewrap or unshare namespaces) and skip without one; the loading
tests and the refusal (tests/test_sandbox.py) do not.
"""

from __future__ import annotations

import csv
import doctest
import gzip
import json
import statistics
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.tasks import code
from reinforce_ada.tasks import sandbox as sb
from reinforce_ada.tasks.code import CodeTest, extract_code, load_code_prompts, load_humaneval, make_code_verifier
from reinforce_ada.types import Sample


def _has_sandbox() -> bool:
    try:
        sb.sandbox("auto")
    except ConfigError:
        return False
    return True


needs_sandbox = pytest.mark.skipif(not _has_sandbox(), reason="no sandbox tool works here (bubblewrap or unshare)")


@pytest.fixture(scope="module")
def verifier():
    return make_code_verifier()


@pytest.fixture(scope="module")
def humaneval():
    return {p.id: p for p in load_humaneval()}


def test_doctests():
    assert doctest.testmod(code).failed == 0


def test_humaneval_prompts(humaneval):
    assert len(humaneval) == 164
    p = humaneval["HumanEval/0"]
    assert p.text.startswith("from typing import List\n\n\ndef has_close_elements(") and p.text.endswith('"""\n')
    test = code.parse_answer(p.answer)
    assert test.entry_point == "has_close_elements" and test.prefix == p.text
    assert test.tests.rstrip().endswith("check(has_close_elements)")
    assert p.meta["canonical_solution"].startswith("    for idx, elem in enumerate(numbers):")


def test_split_is_seeded_and_disjoint(humaneval):
    prompts = list(humaneval.values())
    train, held = code.split(prompts, 40, seed=3)
    again = code.split(prompts, 40, seed=3)
    assert [p.id for p in train] == [p.id for p in again[0]] and len(held) == 40 and len(train) == 124
    assert not {p.id for p in train} & {p.id for p in held}
    assert len(code.split(prompts, 1000, seed=0)[1]) == 82  # at most half is held out


@pytest.mark.parametrize(
    "completion, want",
    [
        ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n"),
        ("text\n```\nx = 1\n```\nmore", "x = 1\n"),  # an unlabelled fence counts as python
        ("```js\nlet x = 1\n```\nno python", "```js\nlet x = 1\n```\nno python"),  # no python block: all of it
        ("```python\ndef f():\n    return 2\n", "def f():\n    return 2\n"),  # cut off before the closing fence
        ("```python\nimport os\n```\n```python\ndef f(): ...\n```\n```python\nprint(f())\n```", "def f(): ...\n"),
    ],
)
def test_extract_code(completion, want):
    assert extract_code(completion, "f") == want


@needs_sandbox
def test_humaneval_right_and_wrong(verifier, humaneval):
    p = humaneval["HumanEval/0"]
    body = p.meta["canonical_solution"]
    fenced = "Here you go:\n```python\nfrom typing import List\n\n\ndef has_close_elements(numbers, threshold):\n"
    fenced += body + "```\nIt compares every pair."
    assert verifier(body, p.answer) == 1.0  # a base model's continuation of the function body
    assert verifier(fenced, p.answer) == 1.0  # a chat model's full function in a fence
    rambling = body + "\n\n\ndef check(candidate):\n    this is not python (\n"
    assert verifier(rambling, p.answer) == 1.0  # a base model that goes on after the body: cut at HumanEval's stops
    rewrite = "def has_close_elements(numbers, threshold):\n    return _close(numbers, threshold)\n\n\n"
    rewrite += "def _close(numbers, threshold):\n" + body
    assert verifier(rewrite, p.answer) == 1.0  # an unfenced whole program with a helper is kept whole
    assert verifier("    return False\n", p.answer) == 0.0  # wrong
    assert verifier("    return True\n", p.answer) == 0.0
    assert verifier("I don't know how to do this.", p.answer) == 0.0  # prose: a syntax error
    assert verifier("", p.answer) == 0.0
    assert verifier("    return None\n", p.answer) == 0.0
    assert verifier("x" * (code.MAX_CODE_CHARS + 1), p.answer) == 0.0


@needs_sandbox
def test_prompt_helpers_come_from_the_prompt_not_the_solution(verifier, humaneval):
    """HumanEval/38's test calls the prompt's `encode_cyclic`: a solution that redefines it cannot weaken the test."""
    p = humaneval["HumanEval/38"]
    assert verifier(p.meta["canonical_solution"], p.answer) == 1.0
    cheat = "    return s\n\n\ndef encode_cyclic(s):\n    return s\n"
    assert verifier(cheat, p.answer) == 0.0


@pytest.mark.slow
@needs_sandbox
def test_humaneval_canonical_solutions_pass_concurrently(verifier, humaneval):
    """A sample of the canonical solutions (every 8th problem) scores 1, their mutations 0, from a thread pool."""
    chosen = list(humaneval.values())[::8]
    wrong = "    return None\n"
    jobs = [(p.meta["canonical_solution"], p.answer) for p in chosen] + [(wrong, p.answer) for p in chosen]
    with ThreadPoolExecutor(4) as pool:
        scores = list(pool.map(lambda job: verifier(*job), jobs))
    assert scores == [1.0] * len(chosen) + [0.0] * len(chosen)


@pytest.mark.slow
@needs_sandbox
def test_all_humaneval_canonical_solutions_pass(verifier, humaneval):
    """All 164 canonical solutions pass under the default limits and the plain-data guard."""
    with ThreadPoolExecutor(4) as pool:
        scores = dict(
            zip(
                humaneval,
                pool.map(lambda p: verifier(p.meta["canonical_solution"], p.answer), humaneval.values()),
                strict=True,
            )
        )
    assert [k for k, v in scores.items() if v != 1.0] == []


@needs_sandbox
def test_a_check_takes_well_under_a_second(verifier, humaneval):
    p = humaneval["HumanEval/2"]
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        assert verifier(p.meta["canonical_solution"], p.answer) == 1.0
        times.append(time.perf_counter() - t0)
    assert statistics.median(times) < 1.0


@needs_sandbox
def test_score_counts_a_sandbox_that_cannot_start():
    """An interpreter that cannot start (4 MiB of address space) is a verifier error, counted, not a silent 0."""
    starved = make_code_verifier(limits=sb.Limits(memory_mb=4))
    answer = CodeTest("assert f() == 1").to_answer()
    with pytest.raises(RuntimeError, match="did not start"):
        starved("def f():\n    return 1\n", answer)
    samples = [Sample("p", text="def f():\n    return 1\n")]
    assert score(samples, {"p": _prompt(answer)}, starved) == 1 and samples[0].reward == 0.0


def _prompt(answer):
    from reinforce_ada.types import Prompt

    return Prompt("p", "q", answer)


@needs_sandbox
def test_score_fills_rewards(verifier):
    answer = CodeTest("assert double(4) == 8\nassert double(0) == 0").to_answer()
    samples = [
        Sample("p", text="def double(x):\n    return 2 * x\n"),
        Sample("p", text="def double(x):\n    return x\n"),
    ]
    assert score(samples, {"p": _prompt(answer)}, verifier) == 0
    assert [s.reward for s in samples] == [1.0, 0.0]


@needs_sandbox
def test_bare_test_code_as_answer(verifier):
    """A file task whose answer column holds test code works with `verifier = "code"` too."""
    assert verifier("def f(x):\n    return x + 1\n", "assert f(1) == 2") == 1.0
    assert verifier("def f(x):\n    return x\n", "assert f(1) == 2") == 0.0


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@needs_sandbox
def test_mbpp_style_files(tmp_path, verifier):
    rows = [
        {
            "prompt": "Write square(x).",
            "tests": "assert square(3) == 9\nassert square(-2) == 4",
            "entry_point": "square",
        },
        {
            "text": "Write a function to reverse a string.",
            "test_list": ["assert rev('ab') == 'ba'", "assert rev('') == ''"],
        },
        {"prompt": "Write inc(x).", "test": "assert inc(base) == 2", "test_setup_code": "base = 1", "id": "inc"},
    ]
    prompts = load_code_prompts(_jsonl(tmp_path / "mbpp.jsonl", rows))
    assert [p.id for p in prompts] == ["mbpp-000001", "mbpp-000002", "inc"]
    assert "Your code should pass these tests:" in prompts[1].text and "assert rev('ab')" in prompts[1].text
    assert prompts[0].text == "Write square(x)."
    good = [
        "```python\ndef square(x):\n    return x * x\n```",
        "def rev(s):\n    return s[::-1]\n",
        "inc = lambda x: x + 1",
    ]
    bad = ["def square(x):\n    return 2 * x\n", "def rev(s):\n    return s\n", "inc = lambda x: x"]
    assert [verifier(c, p.answer) for c, p in zip(good, prompts, strict=True)] == [1.0, 1.0, 1.0]
    assert [verifier(c, p.answer) for c, p in zip(bad, prompts, strict=True)] == [0.0, 0.0, 0.0]


def test_csv_code_file(tmp_path):
    path = tmp_path / "code.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, ["prompt", "tests"])
        writer.writeheader()
        writer.writerow({"prompt": "Write f.", "tests": "assert f(1) == 1\nassert f(2) == 2"})
        writer.writerow({"prompt": "Write g.", "tests": json.dumps(["assert g() == 0", "assert g() + 1 == 1"])})
    prompts = load_code_prompts(path)
    assert [code.parse_answer(p.answer).tests for p in prompts] == [
        "assert f(1) == 1\nassert f(2) == 2",
        "assert g() == 0\nassert g() + 1 == 1",
    ]


def test_humaneval_layout_in_a_file(tmp_path, humaneval):
    """A file in HumanEval's own layout (prompt, test, entry_point) reads exactly as the bundled HumanEval."""
    with gzip.open(code.humaneval_path(), "rt") as fh:
        rows = [json.loads(line) for line in fh][:5]
    prompts = load_code_prompts(_jsonl(tmp_path / "he.jsonl", rows))
    assert prompts == [humaneval[f"HumanEval/{i}"] for i in range(5)]


@pytest.mark.parametrize(
    "row, message",
    [
        ({"tests": "assert f() == 1"}, r"row 2 has no 'prompt'"),
        ({"prompt": "Write f."}, r"row 2 has no tests column \(one of \['tests', 'test_list', 'test'\]\)"),
        ({"prompt": "Write f.", "tests": "assert f( == 1"}, r"row 2 column 'tests' is not valid Python"),
        ({"prompt": "Write f.", "tests": "assert f()", "entry_point": "f()"}, r"row 2 column 'entry_point' must be"),
        ({"prompt": ["a list"], "tests": "assert f()"}, r"row 2 column 'prompt' must be text, got list"),
        ({"prompt": 7, "tests": "assert f()"}, r"row 2 column 'prompt' must be text, got int"),
        ({"prompt": "Write f.", "tests": []}, r"row 2 column 'tests' must be a non-empty list"),
        ({"prompt": "Write f.", "tests": ["assert f()", 3]}, r"row 2 column 'tests' must be a non-empty list"),
        ({"prompt": "Write f.", "tests": {"a": 1}}, r"row 2 column 'tests' must be text, got dict"),
        ({"prompt": "Write g.", "tests": "assert g()", "id": "a"}, r"id 'a' appears more than once"),
        ({"prompt": "Write f.", "tests": "assert f() == 1", "id": "b"}, r"row 2 repeats row 1"),
    ],
)
def test_bad_rows_name_file_row_and_column(tmp_path, row, message):
    path = _jsonl(tmp_path / "bad.jsonl", [{"prompt": "Write f.", "tests": "assert f() == 1", "id": "a"}, row])
    with pytest.raises(ConfigError, match=message) as err:
        load_code_prompts(path)
    assert str(path) in str(err.value)


def test_bad_csv_list_and_empty_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('prompt,tests\nWrite f.,"[not json"\n')
    with pytest.raises(ConfigError, match=r"row 1 column 'tests' starts with '\[' but is not a JSON list"):
        load_code_prompts(path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="holds no rows"):
        load_code_prompts(empty)


# --- the two-process harness (tasks.code_harness): the tests run where the model's code cannot reach -------------


@needs_sandbox
def test_patching_what_the_tests_import_does_not_pass(verifier, humaneval):
    """HumanEval/32's check uses `math.fabs`; wrong code that patches it (or unittest's assertEqual) scores 0."""
    p = humaneval["HumanEval/32"]
    assert verifier(p.meta["canonical_solution"], p.answer) == 1.0
    assert verifier("    import math\n    math.fabs = lambda x: 0.0\n    return 0.0\n", p.answer) == 0.0
    fenced = "```python\nimport math\nmath.fabs = lambda x: 0.0\n\n\ndef find_zero(xs):\n    return 0.0\n```"
    assert verifier(fenced, p.answer) == 0.0
    unittest_tests = """
        import unittest


        class T(unittest.TestCase):
            def test(self):
                self.assertEqual(add(2, 3), 5)


        result = unittest.TextTestRunner().run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
        assert result.wasSuccessful()
    """
    unittest_style = CodeTest(textwrap.dedent(unittest_tests), entry_point="add").to_answer()
    assert verifier("def add(a, b):\n    return a + b\n", unittest_style) == 1.0
    patched = (
        "import unittest\n\nunittest.TestCase.assertEqual = lambda *a, **k: None\n\n\ndef add(a, b):\n    return 0\n"
    )
    assert verifier(patched, unittest_style) == 0.0


@needs_sandbox
def test_plain_data_crosses_both_ways_and_in_place_changes_come_back(verifier):
    tests = """
        x = [3, 1, 2]
        sort_in_place(x)
        assert x == [1, 2, 3]
        d = {}
        fill(d)
        assert d == {"k": (1, 2)}
        v = (b"ab", (1, 2.5), {1: {2}}, frozenset({3}), 1 + 2j, None, True, float("inf"), -0.0)
        assert same(*v) == v and type(same(True)[0]) is bool
        assert same(k=[1]) == ({"k": [1]},)
        assert LIMIT == 10
        try:
            same(1, fail=True)
        except ValueError as e:
            assert str(e) == "no"
        else:
            raise AssertionError
        assert math.isclose(root(2.0), 2**0.5)  # math: imported by the solution only, imported afresh for the tests
    """
    solution = """
        import math

        LIMIT = 10


        def sort_in_place(x):
            x.sort()


        def fill(d):
            d["k"] = (1, 2)


        def same(*a, fail=False, **k):
            if fail:
                raise ValueError("no")
            return a + ((k,) if k else ())


        def root(x):
            return math.sqrt(x)
    """
    tests, solution = textwrap.dedent(tests), textwrap.dedent(solution)
    assert verifier(solution, tests) == 1.0


@needs_sandbox
@pytest.mark.parametrize(
    "solution",
    [
        "class Yes:\n    def __eq__(self, other):\n        return True\n\n\ndef f():\n    return Yes()\n",
        "def f():\n    return (x for x in [1])\n",
        "import os\n\n\ndef f():\n    os._exit(0)\n",
        "import sys\n\n\ndef f():\n    sys.exit(0)\n",
        "def f():\n    raise KeyboardInterrupt\n",
    ],
    ids=["always-equal", "generator", "os-exit", "sys-exit", "keyboard-interrupt"],
)
def test_what_the_solution_cannot_pass_off_as_a_pass(verifier, solution):
    """Non-plain returns, and a solution that ends or raises BaseException mid-call, fail even tests that catch
    every Exception."""
    tests = "try:\n    r = f()\nexcept Exception:\n    r = 1\nassert r == 1 or list(r) == [1]\n"
    assert verifier(solution, tests) == 0.0


@pytest.mark.parametrize(
    "completion, want",
    [
        ("from typing import List\n\n\ndef f(xs: List[int]) -> int:\n    return sum(xs)\n", "whole"),
        ("Sure! Here it is:\nimport math\n\ndef f(x):\n    return math.sqrt(x)\nThis uses the square root.", "code"),
        ("import os\nwhile True:\n    os.fork()\n\n\ndef f():\n    return 1\n", "whole"),  # all code: all of it runs
    ],
)
def test_unfenced_code_that_defines_the_entry_point(completion, want):
    expect = completion if want == "whole" else "import math\n\ndef f(x):\n    return math.sqrt(x)\n"
    assert extract_code(completion, "f", continuation=True) == expect


@needs_sandbox
def test_a_restated_prompt_with_its_body_passes_unfenced(verifier, humaneval):
    p = humaneval["HumanEval/0"]
    restated = p.text + p.meta["canonical_solution"]
    assert verifier(restated, p.answer) == 1.0
    assert verifier("Here is my solution:\n\n" + restated + "\nIt checks every pair.", p.answer) == 1.0
    assert verifier(p.text + "    return False\n", p.answer) == 0.0


@needs_sandbox
def test_the_code_verifier_refuses_a_task_that_is_not_code():
    """`--task.verifier code` on the arithmetic default ran answers such as "12" as passing tests (accuracy 1.0)."""
    from reinforce_ada.tasks import build
    from reinforce_ada.tasks.config import TaskConfig

    with pytest.raises(ConfigError, match="task 'arithmetic' cannot be scored by verifier 'code'.*'numeric'"):
        build(TaskConfig(train_size=8, eval_size=2, verifier="code"))


@needs_sandbox
def test_the_solution_cannot_ptrace_the_judge(verifier):
    """The judge is undumpable: the solution's PTRACE_ATTACH on it fails with EPERM (without that, it succeeds
    inside the sandbox, and a tracer could write the judge's memory). The tests pass only when the attach is refused."""
    solution = textwrap.dedent(
        """
        import ctypes
        import os
        import time


        def probe():
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.ptrace(16, os.getppid(), 0, 0) == 0:  # PTRACE_ATTACH
                time.sleep(0.1)
                libc.ptrace(17, os.getppid(), 0, 0)  # PTRACE_DETACH: let the judge go on, to fail the test
                return "attached"
            return ctypes.get_errno()
        """
    )
    assert verifier(solution, "import errno\n\nassert probe() == errno.EPERM\n") == 1.0
