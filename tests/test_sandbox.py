"""The code sandbox against model-written attacks (the corpus in tests/adversarial/code/cases.toml, see its header).

Every sample is a completion for `add(a, b)` that returns the right sum only if its attack worked, so a score of 1
means an escape. Each runs through the `code` verifier in every sandbox tool this machine has (bubblewrap, unshare),
all concurrently from a thread pool, under tight limits. A case passes when it scores 0, ends within its time bound,
and leaves no trace: no file outside the sandbox, no connection to the test's listeners, no process left behind, the
test process alive. The refusal tests check that a missing tool, or one that does not isolate, is a ConfigError.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import sandbox as sb
from reinforce_ada.tasks.code import CodeTest, make_code_verifier
from tests.helpers import corpus

CORPUS = {name.removesuffix(".txt"): case["text"] for name, case in corpus("code").items()}
CASES = sorted(CORPUS)
REPO = Path(__file__).resolve().parents[1]
LIMITS = sb.Limits(wall_s=2.0, cpu_s=1, memory_mb=256, processes=8, file_mb=0.5, tmp_mb=8)
BOUND_S = LIMITS.wall_s + 4.0
SCORES = {"huge_output": (0.0, 1.0)}
"""Allowed scores where the attack's function is right: huge_output's floods go to /dev/null in the solution's process
(tasks.code_harness: nothing it prints reaches the judge) and its file stops at RLIMIT_FSIZE; if that ends within the
wall-clock limit its correct `add` scores 1.0, if not it is killed and scores 0 -- bounded either way (the other
assertions). Every other case must score 0."""
"""Longest a case may take: the wall-clock limit plus slack for a busy shared CPU."""
PROBLEM = CodeTest(
    "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nassert abs(add(0.5, 0.25) - 0.75) < 1e-9\n", entry_point="add"
)
REWARD_HACKS = [
    "always_equal",
    "exit_early",
    "exit_inside_test",
    "fake_pass_output",
    "os_exit_early",
    "patch_builtins",
    "secret_from_frames",
    "settrace_skip_asserts",
]
"""Samples that attack the reward, not the machine: they pass a naive harness (code + tests, exit status 0)."""


def _tools() -> list[str]:
    tools = []
    for tool in sb.TOOLS:
        try:
            sb.sandbox(tool)
        except ConfigError:
            continue
        tools.append(tool)
    return tools


TOOLS = _tools()
needs_sandbox = pytest.mark.skipif(not TOOLS, reason="no sandbox tool works here (bubblewrap or unshare)")


def _processes_with(token: str) -> list[int]:
    """Processes whose command line is `sleep <token>` (what the samples leave behind when they can)."""
    needle = b"sleep\0" + token.encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry))
            except OSError:  # deliberate: the process ended while we looked
                pass
    return found


def _wait_gone(token: str, within_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := _processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class _Listener:
    """Counts connections to a TCP port on the host's 127.0.0.1 or to a unix socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.accepted = sock, 0
        sock.listen(16)
        sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def attacks():
    """Run every (case, tool) once, concurrently; yield the outcomes and the places to look for traces."""
    if not TOOLS:
        pytest.skip("no sandbox tool works here")
    outside = Path(tempfile.mkdtemp(prefix="radv-"))  # world-readable and writable: only isolation can stop access
    outside.chmod(0o777)
    secret = uuid.uuid4().hex
    canary = outside / "canary.txt"
    canary.write_text(f"the secret is {secret}\n")
    canary.chmod(0o644)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(outside / "s"))
    os.chmod(outside / "s", 0o777)
    listeners = [_Listener(tcp), _Listener(unix)]
    os.environ["REINFORCE_ADA_TEST_SECRET"] = secret
    verifiers = {tool: make_code_verifier(sandbox=tool, limits=LIMITS) for tool in TOOLS}
    jobs = {}
    for case in CASES:
        for tool in TOOLS:
            token = f"1000.{uuid.uuid4().int % 10**12:012d}"  # a number, so `sleep` accepts it
            values = {
                "CANARY_READ": str(canary),
                "SECRET": secret,
                "REPO": str(REPO),
                "CANARY_WRITE": str(outside / f"written-{token}"),
                "TOKEN": token,
                "PORT": str(tcp.getsockname()[1]),
                "UNIX_SOCKET": str(outside / "s"),
                "TEST_PID": str(os.getpid()),
            }
            text = CORPUS[case]
            for key, value in values.items():
                text = text.replace(f"@@{key}@@", value)
            assert "@@" not in text, f"{case}: unknown placeholder"
            jobs[case, tool] = (text, values)

    def run(key):
        text, values = jobs[key]
        t0 = time.monotonic()
        score = verifiers[key[1]](text, PROBLEM.to_answer())
        elapsed = time.monotonic() - t0
        return key, {"score": score, "elapsed": elapsed, "left": _wait_gone(values["TOKEN"]), **values}

    try:
        with ThreadPoolExecutor(4) as pool:
            outcomes = dict(pool.map(run, list(jobs)))
        yield {"outcomes": outcomes, "listeners": listeners, "outside": outside}
    finally:
        os.environ.pop("REINFORCE_ADA_TEST_SECRET", None)
        for listener in listeners:
            listener.close()
        for path in outside.iterdir():
            path.unlink()
        outside.rmdir()


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", CASES)
def test_attack_is_blocked_and_scores_zero(attacks, case, tool):
    out = attacks["outcomes"][case, tool]
    assert out["score"] in SCORES.get(case, (0.0,)), f"{case} escaped the {tool} sandbox"
    assert out["elapsed"] < BOUND_S, f"{case} took {out['elapsed']:.1f} s in {tool}"
    assert out["left"] == [], f"{case} left processes behind: {out['left']}"
    token = out["TOKEN"]
    for trace in [out["CANARY_WRITE"], f"{REPO}/{token}.txt", f"/tmp/{token}", f"/{token}", f"/usr/{token}"]:
        assert not os.path.exists(trace), f"{case} wrote {trace} from inside {tool}"
    assert os.getpid() == int(out["TEST_PID"])  # the test process is alive (kill_parent aimed at it)


@needs_sandbox
def test_no_connection_reached_the_host(attacks):
    assert [listener.accepted for listener in attacks["listeners"]] == [0, 0]


@needs_sandbox
def test_the_attack_samples_would_score_one_without_a_sandbox():
    """The samples are live: read_canary, run directly (no sandbox) on this test's own canary, returns the sum."""
    with tempfile.TemporaryDirectory() as d:
        canary = Path(d) / "canary.txt"
        canary.write_text("s3cret")
        text = CORPUS["read_canary"].replace("@@CANARY_READ@@", str(canary))
        space: dict = {}
        exec(compile(text.replace("@@SECRET@@", "s3cret"), "read_canary.py", "exec"), space)  # our own sample
    assert space["add"](2, 3) == 5


@needs_sandbox
@pytest.mark.parametrize("case", REWARD_HACKS)
def test_reward_hacks_fool_a_naive_harness(case):
    """The reward hacks are live: run as code + tests with exit status 0 as the verdict (in the sandbox), they pass."""
    text = CORPUS[case]
    result = sb.sandbox(TOOLS[0]).run(text + "\n" + PROBLEM.tests, b"", LIMITS)
    assert result.returncode == 0, result.output[-2000:]


@needs_sandbox
@pytest.mark.parametrize("tool", TOOLS)
def test_limits_hold_inside(tool):
    lim = sb.Limits(wall_s=10.0, cpu_s=2, memory_mb=300, processes=6, file_mb=0.25, tmp_mb=4, output_chars=300_000)
    program = textwrap.dedent(
        """
        import os, resource
        got = [resource.getrlimit(getattr(resource, "RLIMIT_" + n)) for n in ("CPU", "AS", "NPROC", "FSIZE", "CORE")]
        print(got, os.getcwd(), sorted(os.environ), os.getpid())
        print("y" * 10**6)
        """
    )
    result = sb.sandbox(tool).run(program, b"", lim)
    assert result.started and "[(2, 3), (314572800, 314572800), (6, 6), (262144, 262144), (0, 0)] /tmp" in result.output
    assert "['HOME', 'LANG', 'PATH'" in result.output  # (bwrap adds PWD) nothing of the caller's environment
    assert result.returncode != 0  # the 1 MB line hit the 0.25 MB file limit (not even the error fits)
    assert 200_000 < len(result.output) <= 2**18 and not result.timed_out  # the output file stopped at 0.25 MiB


@needs_sandbox
def test_a_slow_start_is_reported_not_charged_to_the_program():
    box = sb.sandbox(TOOLS[0])
    late = box.run("print('hi')", b"", sb.Limits(start_s=0.001))
    assert not late.started and late.timed_out and "hi" not in late.output
    assert box.run("print('hi')", b"", sb.Limits(wall_s=0.001)).started  # a tiny wall clock starts from the start


@needs_sandbox
@pytest.mark.parametrize("tool", TOOLS)
def test_concurrent_runs_stay_apart(tool):
    box = sb.sandbox(tool)
    program = "import os, sys\nopen('/tmp/mine', 'w').write(sys.stdin.read())\nprint(open('/tmp/mine').read())\n"
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda i: box.run(program, f"run-{i}".encode()), range(12)))
    assert [r.output.strip() for r in results] == [f"run-{i}" for i in range(12)]


@needs_sandbox
@pytest.mark.parametrize("tool", TOOLS)
def test_sandbox_dies_with_its_caller(tool):
    """A caller killed with SIGKILL mid-check takes its sandbox (and what that started) down with it."""
    token = f"1000.{uuid.uuid4().int % 10**12:012d}"
    caller = textwrap.dedent(
        f"""
        from reinforce_ada.tasks import sandbox as sb
        program = "import os, time\\nif os.fork() == 0:\\n    os.execv('/usr/bin/sleep', ['sleep', '{token}'])\\n"
        sb.sandbox({tool!r}).run(program + "time.sleep(60)\\n", b"", sb.Limits(wall_s=60, cpu_s=60))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", caller])
    try:
        deadline = time.monotonic() + 20
        while not _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(token), "the sandboxed process never started"
        proc.kill()
        proc.wait()
        assert _wait_gone(token) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_missing_tool_is_refused():
    missing = {"bwrap": "/nonexistent/bwrap", "unshare": "/nonexistent/unshare"}
    for tool in sb.TOOLS:
        with pytest.raises(ConfigError, match=f"sandbox tool '{tool}' not found"):
            sb.sandbox(tool, binaries=missing)
    with pytest.raises(ConfigError, match="refuses to run it.*bwrap.*unshare"):
        make_code_verifier(sandbox="auto", binaries=missing)
    with pytest.raises(ConfigError, match="sandbox='docker' is not valid"):
        sb.sandbox("docker")


def test_a_tool_that_does_not_isolate_is_refused():
    """A fake `bwrap` that drops its options and runs the interpreter bare (bare exec) fails the isolation probe."""
    folder = tempfile.mkdtemp(prefix="radv-fake-")
    try:
        os.chmod(folder, 0o755)  # uid 65534 must be able to run it (the sandbox drops to it under root)
        fake = Path(folder) / "bwrap"
        fake.write_text(f'#!/bin/sh\nwhile [ "$1" != "{sb.default_python()}" ]; do shift; done\nexec "$@"\n')
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
        with pytest.raises(ConfigError, match="failed its isolation probe"):
            sb.sandbox("bwrap", binaries={"bwrap": str(fake)})
    finally:
        for path in Path(folder).iterdir():
            path.unlink()
        os.rmdir(folder)


@pytest.mark.parametrize(
    "field, value",
    [
        ("wall_s", 0),
        ("wall_s", float("inf")),
        ("file_mb", float("nan")),
        ("cpu_s", -1),
        ("cpu_s", 2.5),
        ("memory_mb", float("nan")),
        ("processes", 2),
        ("tmp_mb", "8"),
        ("open_files", True),
    ],
)
def test_bad_limits_are_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        sb.Limits(**{field: value})
