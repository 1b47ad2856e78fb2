"""Every config in tests/adversarial/configs/cases.toml is refused with a ConfigError naming what is wrong (its
`# expect:`); each is written into a scratch folder under its own name and loaded from there."""

from __future__ import annotations

import re

import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.training.config import load_toml
from tests.helpers import corpus, corpus_file

CONFIGS = corpus("configs")
CASES = sorted(CONFIGS)


def expected(name: str) -> str:
    first = CONFIGS[name]["text"].splitlines()[0]
    assert first.startswith("# expect: "), f"{name}: the first line must be '# expect: REGEX'"
    return first.removeprefix("# expect: ")


def test_the_corpus_is_there():
    assert len(CASES) >= 20
    assert all(name.endswith(".toml") and set(CONFIGS[name]) == {"text"} for name in CASES)


@pytest.mark.parametrize("name", CASES, ids=[n.removesuffix(".toml") for n in CASES])
def test_bad_config_is_a_clear_error(name, tmp_path):
    path = corpus_file("configs", name, tmp_path)
    with pytest.raises(ConfigError) as e:
        cfg = load_toml(path)
        # some checks need the built task (the verifier is imported only then)
        from reinforce_ada.tasks import verifiers

        if cfg.task.verifier:
            verifiers.build(cfg.task.verifier)
    assert re.search(expected(name), str(e.value)), str(e.value)


@pytest.mark.parametrize("name", CASES[:3], ids=[n.removesuffix(".toml") for n in CASES[:3]])
def test_the_cli_says_it_in_one_line(name, capsys, tmp_path):
    path = corpus_file("configs", name, tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["train", "--config", str(path), "--steps", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and re.search(expected(name), err)


@pytest.mark.parametrize(
    "name, options",
    [
        ("est", {"estimator": "both", "predictor_dim": 10**9}),
        ("uniform", {"select": "mopps", "candidates": 10**9}),
        ("conformal", {"calibration_prompts": 10**9}),
    ],
)
def test_memory_sized_strategy_options_are_refused_up_front(name, options):
    """Issue 40: predictor_dim, candidates, calibration_prompts of 10**9 failed with MemoryError after minutes. The
    options refuse them wherever a strategy is built (train, plan, simulate, TRL, verl)."""
    from reinforce_ada.sampling.configure import strategy_config

    option = next(iter(k for k in options if k not in ("select", "estimator")))  # the switch turning it on
    with pytest.raises(ConfigError, match=rf"{option}=1000000000: .* the largest {option} here is \d+"):
        strategy_config(name, **options)


def test_candidates_are_sized_with_the_batch_at_training_config_load(monkeypatch):
    """Candidates x batch prompts are drawn a step: a value each option check lets through can still not fit."""
    from reinforce_ada.sampling.configure import strategy_config
    from reinforce_ada.training import bounds
    from reinforce_ada.training.config import RunConfig, TrainConfig

    monkeypatch.setattr(bounds, "usable_memory", lambda: 2**30)
    strategy = strategy_config("uniform", select="mopps", candidates=1000)
    TrainConfig(strategy=strategy, run=RunConfig(batch_size=8))
    with pytest.raises(ConfigError, match=r"strategy.candidates=1000: .* the largest candidates here is 512"):
        TrainConfig(strategy=strategy, run=RunConfig(batch_size=2048))


# -- adversarial round4 -----------------------------------------------------------------------------------------------
# Round 4 of the adversarial cases (issue 52) that live in the sampling core: each failed on 0.4.
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
