"""Issue 40: the repository ships the license pyproject names and says how to cite the paper."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_license_file_is_the_one_pyproject_names():
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_the_citation_file_names_the_paper():
    cff = (ROOT / "CITATION.cff").read_text()
    assert "arXiv:2510.04996" in cff and "preferred-citation:" in cff and "license: Apache-2.0" in cff
