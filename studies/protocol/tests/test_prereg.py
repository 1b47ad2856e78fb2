"""Pre-registration (protocol.prereg): loading, provenance, and every mismatch a check names."""

from __future__ import annotations

import os
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
    # a folder, a FIFO (reading one blocked until a writer came) and Latin-1 text were a traceback or a hang
    with pytest.raises(ConfigError, match="not a regular file"):
        prereg.load(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.toml")
        with pytest.raises(ConfigError, match="not a regular file"):
            prereg.load(tmp_path / "fifo.toml")
    f.write_bytes(GOOD.replace("mopps", "mopps caf\xe9").encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        prereg.load(f)


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


def test_a_claim_edited_after_its_results_were_first_committed_is_not_preregistered(tmp_path):
    def commit(msg):
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", msg)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True).stdout.decode().strip()

    _git(tmp_path, "init", "-q")
    (tmp_path / "study" / "results").mkdir(parents=True)
    f, result = tmp_path / "study" / "p.toml", tmp_path / "study" / "results" / "r.json"
    f.write_text(GOOD)
    commit("prereg")
    result.write_text('{"C1": 1.0}\n')
    assert prereg.first_quoted(f, result) is None  # not committed yet: the registration as it stands is quoted
    first = commit("results")
    run = {"seeds": [0, 1, 2], "steps": 200, "targets": [0.1, 0.5, 0.9]}
    quoted = prereg.first_quoted(f, result)
    assert quoted["commit"] == first and quoted["path"] == "study/p.toml" and quoted["content"] == prereg.load(f)
    assert prereg.check(prereg.load(f), prereg.provenance(f), "C1", "mopps", "hard", run, quoted)["preregistered"]
    f.write_text(GOOD.replace('arm = "mopps"', 'arm = "seq-bal"'))  # the claim moved to the arm that did well
    result.write_text('{"C1": 2.0}\n')
    commit("edit the claim, rewrite the results")
    reg, prov = prereg.load(f), prereg.provenance(f)
    assert prov["committed"]  # committed, so the last-commit check alone reads it as registered
    assert prereg.check(reg, prov, "C1", "seq-bal", "hard", run)["preregistered"]
    quoted = prereg.first_quoted(f, result)
    got = prereg.check(reg, prov, "C1", "seq-bal", "hard", run, quoted)
    assert not got["preregistered"] and len(got["why"]) == 1
    assert "C1's claim was [{'figure': 'C1', 'arm': 'mopps', 'goal': '>= 2.0'}]" in got["why"][0]
    assert f"first committed ({first[:7]})" in got["why"][0] and "'seq-bal'" in got["why"][0]
    # the study moves: both files under new folders, the result rewritten (git sees a new file): still its first commit
    (tmp_path / "moved" / "results").mkdir(parents=True)
    f.rename(tmp_path / "moved" / "p.toml")
    result.unlink()
    (tmp_path / "moved" / "results" / "r.json").write_text('{"C1": 2.0, "regenerated": true}\n')
    commit("move")
    quoted = prereg.first_quoted(tmp_path / "moved" / "p.toml", tmp_path / "moved" / "results" / "r.json")
    assert quoted["commit"] == first and quoted["path"] == "study/p.toml"
    assert not prereg.check(reg, prov, "C1", "seq-bal", "hard", run, quoted)["preregistered"]


def test_first_quoted_edits_elsewhere_and_a_late_registration(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "results").mkdir()
    result, f = tmp_path / "results" / "r.json", tmp_path / "p.toml"
    result.write_text("{}\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "results before any registration")
    f.write_text(GOOD + '[[claim]]\nfigure = "C2"\narm = "mopps"\n')
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "registered late")
    run = {"seeds": [0, 1, 2], "steps": 200, "targets": [0.1, 0.5, 0.9]}
    reg, prov, quoted = prereg.load(f), prereg.provenance(f), prereg.first_quoted(f, result)
    late = prereg.check(reg, prov, "C1", "mopps", "hard", run, quoted)
    assert not late["preregistered"] and "not in the repository when the results" in late["why"][0]
    # registered, then results, then a comment and another figure's claim edited: C1 stays registered, C2 does not
    then = {"commit": "f" * 40, "path": "p.toml", "sha256": None, "content": prereg.load(f)}
    f.write_text(GOOD + '# a comment added later\n[[claim]]\nfigure = "C2"\narm = "seq-bal"\n')
    now = prereg.load(f)
    assert prereg.check(now, prov, "C1", "mopps", "hard", run, then)["preregistered"]
    c2 = prereg.check(now, prov, "C2", "seq-bal", "hard", run, then)
    assert not c2["preregistered"] and "C2's claim was" in c2["why"][-1]
    f.write_text(GOOD.replace("steps = 200", "steps = 100"))
    inst = prereg.check(prereg.load(f), prov, "C1", "mopps", "hard", {**run, "steps": 100}, then)
    assert not inst["preregistered"] and "[instrument] ['steps']" in inst["why"][0]


def test_every_registration_names_a_commit_of_this_repository():
    """A registration's `code` is the commit its runs are made by (a worktree of it): a hash that names no commit
    would stop the study at its first session. Skipped in a shallow clone, which lacks old commits."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    git = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=root, capture_output=True, text=True)
    if git.returncode != 0 or git.stdout.strip() != "false":
        pytest.skip("not a full git clone")
    files = sorted(root.glob("studies/*/registrations/*.toml"))
    codes = {
        f.name: line.split('"')[1] for f in files for line in f.read_text().splitlines() if line.startswith("code =")
    }
    assert len(codes) >= 10
    missing = {
        name: c
        for name, c in codes.items()
        if subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=root, capture_output=True).returncode
    }
    assert missing == {}
