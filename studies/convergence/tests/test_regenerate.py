"""The convergence study regenerates its committed results and summary from its records."""

from __future__ import annotations

import pytest

from studies.convergence import regenerate
from studies.protocol.tests.regen import same_as_committed


@pytest.mark.slow
def test_the_committed_results_regenerate_from_the_records(tmp_path):
    regenerate.main(["--out", str(tmp_path)])
    names = [f"{n}.json" for n in regenerate.ORDER] + ["allocator_goals.json", "summary.json"]
    same_as_committed(tmp_path, regenerate.RESULTS, names)
