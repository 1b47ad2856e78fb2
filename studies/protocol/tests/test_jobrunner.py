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
