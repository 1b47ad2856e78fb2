"""The compute-to-target study regenerates a committed result from its records: the tie-break's third seed set,
with the reading it stores, read from the first run's and the re-run's records as well."""

from __future__ import annotations

import pytest

from studies.compute_to_target import regenerate
from studies.protocol.tests.regen import same_as_committed


@pytest.mark.slow
def test_a_committed_result_regenerates_from_the_records(tmp_path):
    regenerate.main(["--out", str(tmp_path), "--only", "compute_to_target_mixed_tiebreak"])
    same_as_committed(tmp_path, regenerate.RESULTS, ["compute_to_target_mixed_tiebreak.json"])
