"""A digest for every input a run depends on (`training.inputs`): recorded in `inputs.json` when the run starts,
compared on resume. A file changed since (a prior file edited between save and resume, a data file rewritten), or a
"new place" of a moved file that is another file (another dataset with the same ids, another verifier), is refused
naming the field, the file and what to do; the same file moved resumes; a folder from before digests resumes as
before and is recorded from then on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reinforce_ada.cli import main
from reinforce_ada.training.tracking import read_metrics
from tests.test_run_lifecycle import _project, cli_flags

INPUTS = "inputs.json"


@pytest.fixture(scope="module")
def base(model_dir, tmp_path_factory) -> Path:
    """A project (data, held-out, prior and verifier files) with a 1-step run of it in `run/`, made once."""
    root = tmp_path_factory.mktemp("digests") / "a"
    flags = _project(root)
    my = root / "my"
    flags = [f.replace("my/", f"{my}/") if f.startswith("my/") else f for f in flags]
    assert main(["train", *cli_flags(model_dir), *flags, "--steps", "1", "--run-dir", str(root / "run")]) == 0
    return root


def clone(base: Path, dst: Path) -> Path:
    """The project and its run as if made at `dst` (the recorded paths rewritten): each test edits its own files."""
    shutil.copytree(base, dst)
    for name in ("config.toml", INPUTS):
        f = dst / "run" / name
        f.write_text(f.read_text().replace(str(base), str(dst)))
    return dst


def resume(run: Path, *flags: str) -> int:
    return main(["train", "--resume", str(run), "--steps", "2", *flags])


def refused(capsys, run: Path, *flags: str) -> str:
    with pytest.raises(SystemExit) as e:
        resume(run, *flags)
    assert e.value.code == 2
    assert [m["step"] for m in read_metrics(run)] == [0, 1]  # nothing was trained
    return capsys.readouterr().err


def test_a_run_records_each_inputs_sha256_and_size(base):
    from reinforce_ada.training.inputs import digest

    recorded = json.loads((base / "run" / INPUTS).read_text())
    assert set(recorded) == {"model.path", "task.path", "task.eval_path", "strategy.prior_file", "task.verifier"}
    assert recorded["task.path"]["path"] == str(base / "my" / "d.jsonl")
    assert recorded["task.path"]["size"] == (base / "my" / "d.jsonl").stat().st_size
    assert recorded["task.verifier"]["sha256"] == digest(base / "my" / "v.py")["sha256"]


def test_a_prior_file_edited_between_save_and_resume_is_refused(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    (p / "my" / "prior.jsonl").write_text('{"prompt": "1+1=", "pass_rate": 0.9}\n')  # was 0.5: read silently
    err = refused(capsys, p / "run")
    assert f"strategy.prior_file='{p}/my/prior.jsonl' changed since the run started" in err
    assert "give the file the run trained on (--prior-file PATH), or start a new run in another folder" in err


def test_a_data_file_rewritten_in_place_is_refused(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    data = p / "my" / "d.jsonl"
    rows = [json.loads(ln) for ln in data.read_text().splitlines()]
    data.write_text("".join(json.dumps({**r, "features": [1.0, 2.0]}) + "\n" for r in rows))  # features added
    err = refused(capsys, p / "run")
    assert f"task.path='{data}' changed since the run started" in err and "(--task.path PATH)" in err


@pytest.mark.parametrize(
    "field, flag, other",
    [
        ("task.path", "--task.path", lambda my: my / "e.jsonl"),  # another dataset, its ids a subset of the run's
        ("task.verifier", "--task.verifier", lambda my: f"{my / 'yes.py'}:score"),  # another verifier: always 1.0
    ],
    ids=["dataset", "verifier"],
)
def test_a_moved_files_new_place_must_have_its_recorded_digest(base, tmp_path, capsys, field, flag, other):
    p = clone(base, tmp_path / "p")
    moved = p.rename(tmp_path / "q")  # the project moved: config.toml names files under p/ that are gone
    my = moved / "my"
    (my / "yes.py").write_text("def score(completion, answer):\n    return 1.0\n")
    new = {"--task.path": str(my / "d.jsonl"), "--task.eval_path": str(my / "e.jsonl")}
    new |= {"--prior-file": str(my / "prior.jsonl"), "--task.verifier": f"{my / 'v.py'}:score"}
    new[flag] = str(other(my))
    err = refused(capsys, moved / "run", *[x for kv in new.items() for x in kv])
    assert f"{field}='{other(my)}' is not the file the run recorded for it ({p}/my/" in err
    new[flag] = {"--task.path": str(my / "d.jsonl"), "--task.verifier": f"{my / 'v.py'}:score"}[flag]
    with pytest.warns(
        UserWarning, match=r"no longer exists; it resumes with .* \(it has the sha256 the run recorded\)"
    ):
        assert resume(moved / "run", *[x for kv in new.items() for x in kv]) == 0  # the same files: it resumes
    assert [m["step"] for m in read_metrics(moved / "run")] == [0, 1, 2]


def test_a_run_folder_from_before_digests_resumes_and_is_recorded_from_then_on(base, tmp_path):
    from reinforce_ada.training.inputs import digest

    p = clone(base, tmp_path / "p")
    (p / "run" / INPUTS).unlink()  # written by 0.4.0: no inputs.json
    (p / "my" / "prior.jsonl").write_text('{"prompt": "1+1=", "pass_rate": 0.7}\n')
    assert resume(p / "run") == 0  # trusted by path, as before
    recorded = json.loads((p / "run" / INPUTS).read_text())
    assert recorded["strategy.prior_file"]["sha256"] == digest(p / "my" / "prior.jsonl")["sha256"]


def test_a_damaged_record_is_refused_not_ignored(base, tmp_path, capsys):
    p = clone(base, tmp_path / "p")
    (p / "run" / INPUTS).write_text('{"task.path": {"sha256": 1}}')
    assert "inputs.json is not a record of the run's inputs" in refused(capsys, p / "run")


def test_a_folder_is_digested_by_its_files(tmp_path):
    from reinforce_ada.training.inputs import digest

    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "sub" / "w.bin").write_bytes(b"\0" * 10)
    first = digest(tmp_path / "m")
    assert first["size"] == 12
    (tmp_path / "m" / "sub" / "w.bin").write_bytes(b"\1" * 10)
    assert digest(tmp_path / "m")["sha256"] != first["sha256"]
    assert digest(tmp_path / "missing") is None
