"""Round 4 of the adversarial cases (issue 52) that live in the sampling core: each failed on 0.4."""

from __future__ import annotations

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PromptMemory


def test_an_arm_spec_giving_an_option_twice_is_refused_not_last_wins():
    with pytest.raises(ConfigError, match=r"decay is given twice \('0.5' and '0.7'\)"):
        parse_arm("spo:decay=0.5,decay=0.7")


def test_prior_alpha_and_beta_whose_sum_overflows_are_refused():
    with pytest.raises(ConfigError, match="their sum .* overflows"):
        strategy_config("uniform", prior_alpha=1e308, prior_beta=1e308)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"visits": "3"}, r"visits='3' must be a whole number"),
        ({"visits": -1}, r"visits=-1 must be a whole number"),
        ({"w": {"0": "x"}}, r"weight '0' = 'x' must be a finite number"),
        ({"w": {"99999999": 1.0}}, r"weight '99999999' = 1.0 must be a finite number at an index"),
        ({"w": {"1": float("nan")}}, r"weight '1' = nan"),
    ],
)
def test_a_damaged_predictor_state_is_refused_at_load_naming_the_key(bad, match):
    m = PromptMemory(strategy_config("est", estimator="both", predictor_dim=8).options)
    state = m.state_dict()
    state["predictor"] = {**state["predictor"], **bad}
    fresh = PromptMemory(strategy_config("est", estimator="both", predictor_dim=8).options)
    with pytest.raises(ValueError, match=match):
        fresh.load_state_dict(state)
    assert fresh.predictor.visits == 0  # nothing half-loaded


# -- the prior file is read by the one reader of user files ----------------------------------------------------------
@pytest.mark.parametrize(
    "name, content, match",
    [
        ("r.jsonl", '{"id": "a", "pass_rate": 0.5, "samples": Infinity}\n', r"row 1: samples=inf must be a finite"),
        ("r.jsonl", '{"id": "a", "pass_rate": 0.5, "samples": 2.5}\n', r"row 1: samples=2.5 must be a whole number"),
        ("r.jsonl", '{"id": "a", "pass_rate": true}\n', r"row 1: pass_rate=True must be a number"),
        ("r.jsonl", '{"id": "a", "pass_rate": NaN}\n', r"row 1: pass_rate=nan must be a finite number"),
        ("r.csv", "id,pass_rate\na,0.5\na,0.75\n", r"rows 1 and 2 give 'a' two pass rates \(0.5 and 0.75\)"),
        ("r.jsonl", '{"id": "a", "pass_rate": "x"}\n', r"row 1: pass_rate='x' must be a number"),
    ],
)
def test_a_prior_file_is_held_to_the_data_files_rules(tmp_path, name, content, match):
    from reinforce_ada.sampling.memory import read_prior_file

    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(ConfigError, match=match):
        read_prior_file(f)


def test_a_prior_file_reads_what_a_data_file_reads(tmp_path, monkeypatch):
    """A BOM, a raw U+2028 inside a JSON string, a 200,000-character CSV field and a repeated row that agrees all read
    (the old reader refused or split them); a file bigger than the memory this process can get is refused unread."""
    from reinforce_ada import userfiles
    from reinforce_ada.sampling.memory import read_prior_file

    f = tmp_path / "r.jsonl"
    f.write_bytes('\ufeff{"id": "a", "prompt": "x\u2028y", "pass_rate": 0.25}\n'.encode())
    assert read_prior_file(f) == {"a": 0.25, "x\u2028y": 0.25}
    c = tmp_path / "r.csv"
    c.write_text("prompt,pass_rate\n" + "z" * 200_000 + ",0.5\n" + "z" * 200_000 + ",0.5\n")
    assert read_prior_file(c) == {"z" * 200_000: 0.5}
    monkeypatch.setattr(userfiles, "usable_memory", lambda: 100)
    with pytest.raises(ConfigError, match="prior_file .*r.csv is 0.0 GiB; reading it takes about 12x that"):
        read_prior_file(c)
