"""`compare --records` names a folder: a file there (or in its way) is refused naming the flag before any run (issue
52: it was a FileExistsError after the training)."""

from __future__ import annotations

import pytest

from reinforce_ada.bench import compare as bench_compare
from reinforce_ada.cli import main


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_compare_records_naming_a_file_is_refused_before_any_run(where, tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(bench_compare, "run_compare", lambda c: pytest.fail("it ran"))
    argv = ["compare", "--quick", "--records", str(tmp_path / where), "--out", str(tmp_path / "out" / "r")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--records" in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
