"""Default outputs never overwrite an earlier run's (issue 25: `simulate` overwrote runs/simulate.*)."""

from __future__ import annotations

from reinforce_ada.cli import main


def test_simulate_default_output_moves_to_a_free_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "--strategies", "uniform", "--steps", "2", "--seeds", "1", "--pool-size", "64"]
    assert main([*argv, "--batch-size", "8"]) == 0
    first = (tmp_path / "runs/simulate.json").read_bytes()
    assert main([*argv, "--batch-size", "4"]) == 0
    assert (tmp_path / "runs/simulate.json").read_bytes() == first  # kept
    assert (tmp_path / "runs/simulate-1.json").exists() and "runs/simulate-1.json" in capsys.readouterr().out
    assert main([*argv, "--batch-size", "4", "--out", "runs/simulate"]) == 0  # named explicitly: replaced
    assert (tmp_path / "runs/simulate.json").read_bytes() != first
