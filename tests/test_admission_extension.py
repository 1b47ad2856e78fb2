"""An admission rule written outside the package, with an option of its own, registered with one line, works
everywhere a built-in rule does: its option exists only while `select` names the rule (command line, TOML, arm
specs, the Python API), `--help` lists it then and only then, `plan` answers for it, and a run trains with it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission import ADMISSIONS
from reinforce_ada.sampling.advantages import ADVANTAGES
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.options import FEATURES, Options, option_specs, register_feature, resolved_evict
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import STRATEGIES, build_strategy, strategy_class
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.sampling.traits import PLANNERS, Traits
from reinforce_ada.simulation.plan import plan
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.training.config import load_toml
from reinforce_ada.types import Prompt

RULE_FILE = '''
"""Keep every stride-th candidate: an admission rule of one's own, kept outside reinforce_ada's package."""
from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission import AdmissionRule, RankingOptions, register_admission
from reinforce_ada.sampling.fields import option


@dataclass(frozen=True)
class StrideOptions(RankingOptions):
    stride_offset: int = option(0, "which candidate of each run of `candidates` is kept", plan=False)

    def check(self):
        super().check()
        if not 0 <= self.stride_offset < self.candidates:
            raise ConfigError(f"stride_offset={self.stride_offset} must be in [0, candidates={self.candidates})")


class Stride(AdmissionRule):
    ranks = True
    Options = StrideOptions

    def choose(self, candidates, k):
        picked = candidates[self.opts.stride_offset :: self.opts.candidates][:k]
        return picked or candidates[:k], None

    def metrics(self):
        return {"stride_offset": self.opts.stride_offset}


register_admission("stride", Stride, replace=True)  # the one line
'''


@pytest.fixture
def rule_file(tmp_path):
    f = tmp_path / "stride_rule.py"
    f.write_text(RULE_FILE)
    yield f
    ADMISSIONS.pop("stride", None)
    register_feature("select", "stride", None)


@pytest.fixture
def stride(rule_file):
    spec = importlib.util.spec_from_file_location("stride_rule", rule_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the file registers its rule itself
    return "stride"


def test_an_outside_rules_option_exists_only_while_select_names_it(stride):
    cfg = strategy_config("uniform", select=stride, stride_offset=1, candidates=2)
    assert (cfg.options.stride_offset, cfg.options.candidates) == (1, 2)
    assert "stride_offset" in cfg.to_dict() and FEATURES["select"][stride].__name__ == "StrideOptions"
    assert parse_arm("uniform:select=stride,stride_offset=3").options.stride_offset == 3
    plain = strategy_config("uniform")
    assert not hasattr(plain.options, "stride_offset") and "stride_offset" not in plain.to_dict()
    with pytest.raises(ConfigError, match="stride_offset .an option of select=stride"):
        strategy_config("uniform", stride_offset=1)
    with pytest.raises(ConfigError, match=r"stride_offset=5 must be in \[0, candidates=4\)"):
        strategy_config("uniform", select=stride, stride_offset=5, candidates=4)
    assert not hasattr(cfg.replace(select="none").options, "stride_offset")  # the feature off: its options go


def test_an_outside_rule_from_the_command_line_a_toml_file_help_plan_and_a_trained_step(
    rule_file, model_dir, tmp_path, capsys
):
    with pytest.raises(SystemExit) as e:
        main(["--plugin", str(rule_file), "train", "--strategy", "uniform", "--select", "stride", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "select=stride options" in text and "--stride-offset" in text and "run of `candidates`" in text
    with pytest.raises(SystemExit):
        main(["--plugin", str(rule_file), "train", "--strategy", "uniform", "--help"])
    assert "--stride-offset" not in capsys.readouterr().out  # the feature is off: its knob is not shown
    run = tmp_path / "run"
    argv = ["train", "--plugin", str(rule_file), "--strategy", "uniform", "--select", "stride", "--candidates", "2"]
    argv += ["--stride-offset", "1", "--n", "2", "--model.path", str(model_dir), "--model.threads", "1"]
    argv += ["--task.train_size", "64", "--task.eval_size", "4", "--generation.max_new_tokens", "4"]
    argv += ["--batch-size", "4", "--steps", "1", "--eval-every", "0", "--run-dir", str(run), "--run.progress", "false"]
    assert main(argv) == 0
    saved = load_toml(run / "config.toml").strategy
    assert (saved.options.select, saved.options.stride_offset, saved.options.candidates) == ("stride", 1, 2)
    line = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert line["stride_offset"] == 1 and line["unselected_prompts"] == 4  # 8 candidates, 4 admitted
    preset = tmp_path / "stride.toml"
    preset.write_text('[strategy]\nname = "uniform"\nselect = "stride"\nstride_offset = 3\n')
    assert load_toml(preset).strategy.options.stride_offset == 3
    preset.write_text('[strategy]\nname = "uniform"\nstride_offset = 3\n')
    with pytest.raises(ConfigError, match="stride_offset .an option of select=stride"):
        load_toml(preset)
    capsys.readouterr()
    plan = ["--plugin", str(rule_file), "plan", "--strategy", "uniform", "--select", "stride", "--pass-rates", "0.5"]
    assert main([*plan, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["method"] == "given_selected"


def test_a_rule_options_class_that_shadows_a_shared_option_is_refused():
    from dataclasses import dataclass

    from reinforce_ada.sampling.fields import FeatureOptions, option

    @dataclass(frozen=True)
    class Shadow(FeatureOptions):
        decay: float = option(0.5, "shadows the tracker's decay")

    with pytest.raises(ConfigError, match=r"redeclares shared options \['decay'\]"):
        register_feature("select", "shadow", Shadow)
    with pytest.raises(ConfigError, match="frozen dataclass"):
        register_feature("select", "shadow", dict)
    assert "shadow" not in FEATURES["select"]


def test_every_feature_of_the_package_is_declared_beside_its_code():
    """Each switch value with options names a FeatureOptions class in the module of its feature (one place each)."""
    for switch, table in FEATURES.items():
        for value, cls in table.items():
            where = Path(cls.__module__.replace(".", "/")).name
            assert cls.__module__.startswith("reinforce_ada.sampling."), (switch, value, cls)
            assert where in {"iw", "value", "mopps", "greso", "priority", "forgetting", "predictor", "length"}, (
                switch,
                value,
            )


# -- strategy contract ------------------------------------------------------------------------------------------------
# The contract every registered strategy meets: traits and options that describe it truthfully, one step in both
# drivers, exact state round-trips, a plan. A strategy added to the registry is checked here with no edit to this
# file.
NAMES = list(STRATEGIES)
SMALL = {"max_samples": 8, "samples_per_round": 4, "pilot": 4, "candidates": 2}


def small(name: str) -> StrategyConfig:
    """Small sizes, for the options the strategy has."""
    own = strategy_class(name).Options.__dataclass_fields__
    return strategy_config(name=name, **{k: v for k, v in SMALL.items() if k in own})


def pool(size: int = 24, seed: int = 0) -> tuple[list[Prompt], SimulatedPolicy]:
    rates = np.random.default_rng(seed).uniform(0.0, 1.0, size)
    prompts = [Prompt(id=f"c{i}", text=f"prompt {i}") for i in range(size)]
    return prompts, SimulatedPolicy(prompts, rates.tolist(), SimConfig(lr=0.0, seed=seed))


def source(prompts: list[Prompt], start: int):
    """A prompt source that hands out fresh prompts in order and is exhausted at the end."""
    state = {"next": start}

    def more(k: int) -> list[Prompt]:
        out = prompts[state["next"] : state["next"] + k]
        state["next"] += len(out)
        return out

    return more


@pytest.mark.parametrize("name", NAMES)
def test_traits_and_options_describe_the_strategy(name):
    cls = strategy_class(name)
    t = cls.traits
    assert isinstance(t, Traits) and t.planner in PLANNERS
    assert issubclass(cls.Options, Options) and cls.Options.__dataclass_params__.frozen
    for spec in option_specs(cls.Options):  # every option is documented, and one name has one type everywhere
        assert spec.help, f"{name}: option {spec.name} has no help"
        for other in STRATEGIES.values():
            theirs = other.Options.__dataclass_fields__.get(spec.name)
            assert theirs is None or str(theirs.type) == spec.type, f"{spec.name}: {spec.type} vs {theirs.type}"
    cfg = strategy_config(name=name)  # the defaults validate
    assert cfg.options.advantage in ADVANTAGES and cfg.options.scale_std == (
        cfg.options.advantage == "group"
    )  # GRPO's std, or the pool's
    assert cfg.options.select in ADMISSIONS and resolved_evict(cfg.options) in (None, 1.0)
    if t.planner == "allocation":
        counts = cls.plan_counts(np.array([0.1, 0.5, 0.9]), cfg.options, 24)
        assert len(counts) == 3 and all(cfg.options.min_samples <= int(k) <= cfg.options.max_samples for k in counts)
    assert cls.cost_hint(cfg.options) > 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("driver", ["rounds", "streaming"])
def test_one_step_in_each_driver_and_state_round_trips(name, driver):
    prompts, policy = pool()
    strategy = build_strategy(small(name))
    batch_prompts, more = prompts[:8], source(prompts, 8)
    if driver == "rounds":
        batch = collect(strategy, policy, batch_prompts, more_prompts=more)
    else:
        batch = collect_streaming(strategy, policy.streaming(64, None, seed=0), batch_prompts, more_prompts=more)
    assert batch.ledger.samples_generated > 0 and batch.groups
    for g in batch.groups:
        assert len(g.samples) >= 1 and len(g.rewards) == len(g.samples)
    state = json.loads(json.dumps(strategy.state_dict()))  # JSON-serialisable
    twin = build_strategy(small(name))
    twin.load_state_dict(state)
    assert json.dumps(twin.state_dict(), sort_keys=True) == json.dumps(state, sort_keys=True)


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_has_a_plan(name):
    cfg = small(name)
    rows = plan(cfg, [0.2, 0.6])
    assert len(rows) == 2
    for r in rows:
        assert 0.0 <= r.zero_signal <= 1.0 and r.expected_samples > 0
