"""The SmolLM2 study regenerates its committed results and summary from its records."""

from __future__ import annotations

import pytest

from studies.llm_convergence import regenerate
from studies.protocol.tests.regen import same_as_committed


@pytest.mark.slow  # about 6 s: the testbed's comparison and the figure
def test_the_committed_results_regenerate_from_the_records(tmp_path):
    regenerate.main(["--out", str(tmp_path)])
    same_as_committed(tmp_path, regenerate.RESULTS, ["llm_convergence.json", "smollm2_run.json", "summary.json"])
    for name in regenerate.later_registrations():
        same_as_committed(tmp_path / name, regenerate.RESULTS / name, [f"{name}.json", "summary.json"])
