"""The runner half of a resumable study under a registered commit's package (`protocol.jobrunner`)."""

from __future__ import annotations

import reinforce_ada.bench.analysis as analysis
from studies.protocol.jobrunner import package_function


def test_a_commit_without_grow_grid_grows_its_grid_with_this_checkouts_function(monkeypatch):
    """cc18bcd (the confirmation's code) wrote the lr-grid growth inline: the runner reads `grow_grid` from this
    checkout's source and plans the same grown grids as the package's function."""
    grids = {"hard": {"a": (4e-4, 1e-4, 2e-4), "b": (1e-4, 2e-4)}}
    choice = {"hard": {"a": {"best": 4e-4, "at_edge": True}, "b": {"best": 2e-4, "at_edge": False}}}
    assert package_function("grow_grid") is analysis.grow_grid
    monkeypatch.delattr(analysis, "grow_grid")
    older = package_function("grow_grid")
    assert older is not None and older(grids, choice) == (
        {"hard": {"a": (1e-4, 2e-4, 4e-4, 8e-4), "b": (1e-4, 2e-4)}},
        ["hard/a +0.0008"],
    )


def test_long_answer_pools_load_the_running_sums_warm_start_and_an_older_package_the_arithmetic_one(monkeypatch):
    """The runner measured long-answer pools with the arithmetic model (every exact rate 0: `long-hard` came out
    empty); it now asks the package which warm start the pools need, as `compare` does."""
    import reinforce_ada.bench.testbed as testbed
    from studies.protocol.jobrunner import pools_task

    assert pools_task(["long-hard", "long-default"]) == "running_sums"
    assert pools_task(["hard", "default"]) == "arithmetic"
    monkeypatch.delattr(testbed, "pools_task")  # a registered commit from before the long-answer task
    assert pools_task(["hard"]) == "arithmetic"
