"""The belief-quality study regenerates its committed result from its records."""

from __future__ import annotations

from studies.belief_quality import regenerate
from studies.protocol.tests.regen import same_as_committed


def test_the_committed_result_regenerates_from_the_records(tmp_path):
    regenerate.main(["--out", str(tmp_path)])
    same_as_committed(tmp_path, regenerate.RESULTS, ["belief_quality.json"])
