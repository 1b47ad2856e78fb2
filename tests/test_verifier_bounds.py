"""Every verifier call is bounded on every path, a hung verifier never keeps a run from exiting, math workers end
with their parent, and only a function of the user's own is accepted as a custom verifier."""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reinforce_ada import timeouts
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.tasks import build, verifiers
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.types import Prompt, Sample


def test_call_returns_raises_and_times_out():
    assert timeouts.call(lambda a, b: a + b, 1, 2, timeout_s=5) == 3
    with pytest.raises(ZeroDivisionError):
        timeouts.call(lambda: 1 / 0, timeout_s=5)
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match="longer than 0.1 s"):
        timeouts.call(time.sleep, 30, timeout_s=0.1)
    assert time.perf_counter() - t0 < 2
    # the abandoned call does not block the next ones
    assert timeouts.call(lambda: "free", timeout_s=5) == "free"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_verifiers.py").write_text(
        textwrap.dedent(
            """
            import os
            import sys
            import time

            def hangs(completion, answer):
                time.sleep(3600)

            def spins(completion, answer):
                while True:
                    pass

            def exits(completion, answer):
                sys.exit(0)

            def os_exits(completion, answer):
                os._exit(0)

            def not_a_number(completion, answer):
                return "yes"

            def one_arg(completion):
                return 1.0

            def fine(completion, answer):
                return float(completion.strip() == answer)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_verifiers", None)


def test_a_user_verifier_is_bounded_by_default(user_module):
    fn = verifiers.build("my_verifiers:fine")
    assert fn.timeout_s == verifiers.CUSTOM_TIMEOUT_S and fn("4", "4") == 1.0
    assert verifiers.build("my_verifiers:fine", timeout_s=0.5).timeout_s == 0.5
    assert verifiers.build(str(user_module / "my_verifiers.py") + ":fine")(" 7", "7") == 1.0
    # built-ins bound themselves (linear string work; math in a process pool; code in the sandbox)
    assert verifiers.build("arithmetic") is verifiers.VERIFIERS["arithmetic"]


@pytest.mark.slow
def test_hanging_and_non_numeric_user_verifiers_score_zero_and_are_counted(user_module):
    prompts = {"p": Prompt("p", "q", "4")}
    hung = verifiers.build("my_verifiers:hangs", timeout_s=0.2)
    samples = [Sample("p", "4") for _ in range(3)]
    t0 = time.perf_counter()
    assert score(samples, prompts, hung) == 3 and [s.reward for s in samples] == [0.0] * 3
    assert time.perf_counter() - t0 < 5
    samples = [Sample("p", "4")]
    assert score(samples, prompts, verifiers.build("my_verifiers:not_a_number")) == 1 and samples[0].reward == 0.0


@pytest.mark.parametrize(
    "name, message",
    [
        ("os:system", "standard-library module"),
        ("subprocess:run", "standard-library module"),
        ("builtins:eval", "standard-library module"),
        ("my_verifiers:one_arg", r"cannot be called as one_arg\(completion, answer\)"),
        ("my_verifiers:missing", "could not be imported"),
        ("no_such_module_xyz:f", "could not be imported"),
        ("/nonexistent/file.py:f", "is not a file"),
        ("my_verifiers:", "expected module:function"),
        ("nothing", "unknown verifier"),
    ],
)
def test_custom_verifier_refusals_name_the_problem(user_module, name, message):
    with pytest.raises(ConfigError, match=message):
        verifiers.build(name)


@pytest.mark.parametrize("value", [-1.0, 0.0, float("nan"), float("inf")])
def test_verifier_timeout_must_be_positive_and_finite(value):
    with pytest.raises(ConfigError, match="verifier_timeout_s"):
        TaskConfig(verifier_timeout_s=value)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"sandbox": "docker"}, "task.sandbox"), ({"verifier": " "}, "task.verifier"), ({"seed": -1}, "task.seed")],
)
def test_task_config_refusals(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TaskConfig(**kwargs)


@pytest.mark.slow
def test_build_bounds_the_verifier_on_the_eval_path_too(user_module):
    # tasks.build returns the bounded verifier, and evaluation scores through the same object
    _, held_out, verifier = build(
        TaskConfig(train_size=8, eval_size=1, verifier="my_verifiers:hangs", verifier_timeout_s=0.2)
    )
    from reinforce_ada.evaluation.metrics import sample_correct

    class Fixed:  # an engine that answers "x" to everything
        def generate(self, requests):
            return [Sample(r.prompt.id, "x") for r in requests for _ in range(r.k)]

    t0 = time.perf_counter()
    correct, errors = sample_correct(Fixed(), held_out[:2], verifier, samples=2)
    assert errors == 4 and all(v == [0.0, 0.0] for v in correct.values())
    assert time.perf_counter() - t0 < 10


@pytest.mark.slow
@pytest.mark.parametrize("fn", ["hangs", "spins", "exits", "os_exits"])
def test_a_run_whose_verifier_hangs_or_exits_still_ends_with_metrics(
    user_module, tmp_path, tiny_llama, char_tokenizer, fn
):
    """A verifier that hangs, spins the CPU, or calls sys.exit/os._exit costs its rewards (counted), not the run:
    before, `exits` ended the trainer with status 0 and no metrics, and `spins` was never stopped."""
    model = tmp_path / "model"
    tiny_llama.save_pretrained(model)
    char_tokenizer.save_pretrained(model)
    env = {**os.environ, "PYTHONPATH": f"{user_module}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = [
        "--model.path",
        str(model),
        "--model.threads",
        "1",
        "--task.train_size",
        "16",
        "--task.eval_size",
        "1",
        "--generation.max_new_tokens",
        "3",
        "--strategy",
        "uniform",
        "--n",
        "2",
        "--batch-size",
        "2",
        "--steps",
        "1",
        "--eval-every",
        "0",
        "--run.progress",
        "false",
        "--task.verifier",
        f"my_verifiers:{fn}",
        "--task.verifier_timeout_s",
        "0.05",
        "--run.max_verifier_error_share",  # the run goes on through the failures (the default 0.5 would stop it)
        "1.0",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reinforce_ada.cli", "train", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - t0 < 240
    from reinforce_ada.training.tracking import read_metrics

    last = read_metrics(tmp_path / "run")[-1]
    assert last["step"] == 1 and last["verifier_errors"] == last["samples_generated"] > 0


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("math_verify") is None, reason="needs reinforce-ada[math]")
def test_math_workers_end_with_a_killed_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from reinforce_ada.tasks import verifiers

            if __name__ == "__main__":
                assert verifiers.math_answer(r"\\boxed{2}", "2") == 1.0
                procs = verifiers._POOL._executor._processes
                print(" ".join(str(p) for p in procs), flush=True)
                time.sleep(600)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers = [int(x) for x in parent.stdout.readline().split()]
    assert workers
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    deadline = time.time() + 10
    alive = workers
    while alive and time.time() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)]
        time.sleep(0.1)
    assert not alive, f"math-verify workers {alive} outlived their parent"


def _state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "zombie"
    line = next((ln for ln in status.splitlines() if ln.startswith("State:")), "")
    return line.lower()


def test_nan_reward_is_an_error_not_a_reward():
    samples = [Sample("p", "x")]
    assert score(samples, {"p": Prompt("p", "q", "a")}, lambda c, a: math.nan) == 1 and samples[0].reward == 0.0
