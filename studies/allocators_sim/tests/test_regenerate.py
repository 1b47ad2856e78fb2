"""The simulation study regenerates its committed results from its records (the one command's check)."""

from __future__ import annotations

from studies.allocators_sim import regenerate
from studies.protocol.tests.regen import same_as_committed


def test_the_committed_results_regenerate_from_the_records(tmp_path):
    regenerate.main(["--out", str(tmp_path)])
    same_as_committed(tmp_path, regenerate.RESULTS, ["allocators_sim.json", "simulate_hard_pool.json"])
