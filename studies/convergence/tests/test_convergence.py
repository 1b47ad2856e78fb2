"""The convergence study's script and its best-adaptive-arm goals."""

from __future__ import annotations

import pytest

from reinforce_ada.bench.compare import CompareConfig


def test_compare_writes_where_the_user_says_and_the_repository_script_guards_its_results(tmp_path):
    # the user command has no opinion on this repository's folders; the study's script keeps --quick out of the
    # committed results
    from studies.convergence import run as mod

    with pytest.raises(SystemExit, match="scratch"):
        mod.run(["--quick", "--out", str(mod.RESULTS / "x")])
    assert CompareConfig().out.startswith("runs/")
