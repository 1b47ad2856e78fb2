"""Run folders written by 0.3 (one flat StrategyConfig of every strategy's fields, replay under [strategy], GRESO's
admission counters by GRESO's name) still load: their config.toml reads as the new config and their strategy state
loads and round-trips. The fixtures are the config.toml and the strategy state of real 0.3 runs (commit 08d0636,
`reinforce-ada train ... --steps 4 --save-every 2`), their weights left out; resuming those runs to step 6 with this
code gave the same metrics as resuming them with 0.3 (see the closing note of issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.training.config import load_toml, to_toml

FIXTURES = Path(__file__).parent / "fixtures" / "v0_3"


def legacy(name: str) -> tuple[object, dict]:
    cfg = load_toml(FIXTURES / name / "config.toml")
    state = json.loads((FIXTURES / name / "strategy_state.json").read_text())
    return cfg, state


@pytest.mark.parametrize(
    "name, strategy, select, replay",
    [("seq", "seq", "none", False), ("greso_replay", "uniform", "greso", True), ("iw", "uniform", "iw", False)],
)
def test_a_03_config_toml_reads_as_the_new_config(name, strategy, select, replay, tmp_path):
    cfg, _ = legacy(name)
    assert (cfg.strategy.name, cfg.strategy.options.select, cfg.replay.enabled) == (strategy, select, replay)
    (tmp_path / "c.toml").write_text(to_toml(cfg))  # and it is written back in the new form, read the same
    assert load_toml(tmp_path / "c.toml") == cfg
    assert "replay" not in (tmp_path / "c.toml").read_text().split("[model]")[0]  # not under [strategy] any more


@pytest.mark.parametrize("name", ["seq", "greso_replay", "iw"])
def test_a_03_strategy_state_loads_and_round_trips(name):
    cfg, state = legacy(name)
    strategy = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    strategy.load_state_dict(state["strategy"])
    saved = json.loads(json.dumps(strategy.state_dict()))
    twin = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    twin.load_state_dict(saved)
    assert json.dumps(twin.state_dict(), sort_keys=True) == json.dumps(saved, sort_keys=True)
    old = state["strategy"]
    assert saved["pools"] == old["pools"] and saved["rng"] == old["rng"]
    assert {k: saved["memory"][k] for k in old["memory"]} == old["memory"]  # newer keys (levels) start empty
    if "admission" in old:  # the admission stage's own state carries over, its rule's included
        a, b = saved["admission"], old["admission"]
        assert a["rng"] == b["rng"] and a["offered"] == b["offered"] and a["need"] == b["need"]
        rule = {"greso_replay": "greso", "iw": "iw_raw"}[name]
        assert rule in a and (rule != "greso" or {k: a["greso"][k] for k in b["greso"]} == b["greso"])
        assert a["counts"]["skipped_rule"] == b["counts"]["skipped_greso"]


# -- 0.4: every shared option of every rule and mode listed under [strategy] ------------------------------------------
FIXTURES_04 = Path(__file__).parent / "fixtures" / "v0_4"


@pytest.mark.parametrize("name", ["spo", "iw_drift"])
def test_a_04_run_folder_reads_its_features_options_and_its_state_round_trips(name, tmp_path):
    """0.4 wrote all 33 shared options (iw_mix, drift_half, ...) whatever `select` and `forgetting` were. The options
    of a feature that is on load with their values; those of a feature that is off are ignored at their defaults.
    Fixtures: the config.toml and strategy state (step 4) of `reinforce-ada train --strategy spo` and `--strategy
    uniform --select iw --iw-mix 0.3 --estimator both --forgetting drift --drift-half 0.1` (`--steps 4 --save-every 2
    --batch-size 8`) run with commit 0d89033; resuming both to step 6 with this code gave metrics identical to 0.4's
    (timings aside)."""
    cfg = load_toml(FIXTURES_04 / name / "config.toml")
    o = cfg.strategy.options
    if name == "iw_drift":
        assert (o.select, o.iw_mix, o.forgetting, o.drift_half, o.estimator, o.predictor_dim) == (
            "iw",
            0.3,
            "drift",
            0.1,
            "both",
            4096,
        )
        assert not hasattr(o, "priority_eps") and not hasattr(o, "target")  # the rules that are off
    else:
        assert (o.select, o.candidates, o.priority_eps) == ("priority", 16, 0.05) and not hasattr(o, "iw_mix")
    (tmp_path / "c.toml").write_text(to_toml(cfg))  # written back in the new form, read the same
    assert load_toml(tmp_path / "c.toml") == cfg
    assert "iw_mix" not in (tmp_path / "c.toml").read_text() or name == "iw_drift"
    state = json.loads((FIXTURES_04 / name / "strategy_state.json").read_text())
    strategy = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))
    strategy.load_state_dict(state["strategy"])
    assert json.loads(json.dumps(strategy.state_dict())) == state["strategy"]


def test_a_04_feature_option_set_without_its_feature_is_named(tmp_path):
    text = (FIXTURES_04 / "spo" / "config.toml").read_text().replace("iw_mix = 0.2", "iw_mix = 0.3")
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"iw_mix \(an option of select=iw\)"):
        load_toml(tmp_path / "config.toml")
