"""Pre-registration (protocol.prereg): loading, provenance, and every mismatch a check names."""

from __future__ import annotations

import subprocess

import pytest

from reinforce_ada.errors import ConfigError
from studies.protocol import prereg

GOOD = """version = 1
[instrument]
pools = ["hard", "small"]
seeds = [0, 1, 2]
steps = 200
targets = [0.1, 0.5, 0.9]
uniform = ["grpo-n4", "grpo-n8"]
oracles = ["oracle-both"]
[[claim]]
figure = "C1"
arm = "mopps"
goal = ">= 2.0"
"""


def test_prereg_loads_and_rejects_bad_files(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(GOOD)
    assert prereg.load(f)["claim"][0]["arm"] == "mopps"
    for bad, match in [
        (GOOD.replace("version = 1", "version = 2"), "version"),
        (GOOD.replace("seeds = [0, 1, 2]", "seeds = [0, 0]"), "distinct"),
        (GOOD.replace('figure = "C1"', 'figure = "C9"'), "C9"),
        (GOOD.replace("targets = [0.1, 0.5, 0.9]", "targets = [1.5]"), "fractions"),
        (GOOD.split("[[claim]]")[0], "claim"),
        ("version = 1\n[instrument\n", "TOML"),
    ]:
        f.write_text(bad)
        with pytest.raises(ConfigError, match=match):
            prereg.load(f)
    with pytest.raises(ConfigError, match="does not exist"):
        prereg.load(tmp_path / "nope.toml")


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_prereg_check_marks_every_mismatch(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "bench").mkdir()
    f = tmp_path / "bench" / "p.toml"  # below the top: git paths are read from the top
    f.write_text(GOOD)
    _git(tmp_path, "add", "bench/p.toml")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "prereg")
    reg, prov = prereg.load(f), prereg.provenance(f)
    assert prov["committed"] and len(prov["commit"]) == 40
    run = {"seeds": [0, 1, 2], "steps": 200, "targets": [0.1, 0.5, 0.9]}
    assert prereg.check(reg, prov, "C1", "mopps", "hard", run) == {"preregistered": True, "why": []}
    no = prereg.check(reg, prov, "C1", "seq-bal", "mixed", {**run, "seeds": [0, 1]})
    assert not no["preregistered"] and len(no["why"]) == 3
    f.write_text(GOOD + "\n# edited after the commit\n")
    edited = prereg.check(prereg.load(f), prereg.provenance(f), "C1", "mopps", "hard", run)
    assert not edited["preregistered"] and "last commit" in edited["why"][0]
    assert not prereg.check(None, None, "C1", "mopps", "hard", run)["preregistered"]
