"""docs/metrics.md defines every key a run writes, from the definitions beside the code (`docgen.metrics_page`).

1) The committed page is `page()`.
2) Every key of a step's ledger is defined by the code that applies to that strategy -- every registered strategy
   in both drivers, every admission rule, drift forgetting, seq's give-up -- and a one-step `Trainer` run (train and
   eval lines, replay and importance correction on) writes only keys its sources define.
3) No definition is stale: every documented key is written by one of those runs (or by the Ray pool's and the
   benchmark probe's own metrics, read without Ray or a benchmark), or names the condition it is written under.
"""

from __future__ import annotations

import doctest
import gzip
import json
import sys
import types
from dataclasses import fields
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from docgen import metrics_page, published, results, sources, summary
from docgen import page as page_mod
from docgen.__main__ import main
from docgen.page import Page
from docgen.published import PageDataError
from reinforce_ada.sampling.admission import stage
from reinforce_ada.sampling.admission.stage import Admission
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.ledger import Ledger
from reinforce_ada.sampling.memory.forgetting import DriftForgetting
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import STRATEGIES, build_strategy, strategy_class
from reinforce_ada.sampling.streaming import METRICS as STREAMING
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt
from tests.helpers import train_config

ROOT = Path(__file__).resolve().parents[1]
LEDGER = {f.name for f in fields(Ledger) if f.name != "extra"}
SMALL = {"max_samples": 8, "samples_per_round": 4, "pilot": 4}
"""Small sizes, for the options a strategy has (as tests/test_admission_extension.py)."""
FEATURES: dict[str, dict] = {
    **{f"uniform:select={r}": {"select": r, "candidates": 2} for r in ("mopps", "value", "iw", "priority")},
    "uniform:select=greso": {"select": "greso"},
    "seq:select=iw": {"select": "iw", "candidates": 2},
    "uniform:forgetting=drift": {"forgetting": "drift"},
    "seq:give_up=0.5": {"give_up": 0.5},
}
"""The features whose keys only appear when an option turns them on (arm-spec label -> the options)."""
RUNS = [*(n for n, cls in STRATEGIES.items() if metrics_page.ours(cls)), *FEATURES]
DRIVERS = ("rounds", "streaming")


def config(label: str):
    name = label.split(":")[0]
    own = strategy_class(name).Options.__dataclass_fields__
    return strategy_config(name, **{k: v for k, v in SMALL.items() if k in own}, **FEATURES.get(label, {}))


@cache
def run(label: str, driver: str) -> tuple[PoolStrategy, frozenset[str]]:
    """Two steps of the strategy on a simulated policy: the strategy and every key its ledgers had."""
    size = 24
    prompts = [Prompt(id=f"c{i}", text=f"prompt {i}") for i in range(size)]
    rates = np.random.default_rng(0).uniform(0.0, 1.0, size).tolist()
    policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=0))
    strategy = build_strategy(config(label))
    strategy.attach(scorer=policy.scorer())  # forgetting=drift scores earlier responses with the policy
    order = PromptOrder(prompts, seed=0)
    keys: set[str] = set()
    for _ in range(2):
        more = lambda k: order.take(k, exclude=strategy.prompts)  # noqa: E731
        if driver == "rounds":
            batch = collect(strategy, policy, order.take(8), more_prompts=more)
        else:
            batch = collect_streaming(strategy, policy.streaming(64, None, seed=0), order.take(8), more_prompts=more)
        keys |= set(batch.ledger.as_metrics())
    return strategy, frozenset(keys)


def sampling_defs(strategy: PoolStrategy) -> dict[str, str]:
    """The definitions that apply to a strategy's ledger: the ledger's fields, the driver's, the strategy's, the
    admission stage's and its rule's, the memory's."""
    out = {k: "" for k in LEDGER} | STREAMING | type(strategy).METRICS
    if isinstance(strategy, Admission):
        out |= stage.METRICS | strategy.rule.METRICS
    if strategy.memory.drift is not None:
        out |= DriftForgetting.METRICS
    return out


def test_the_committed_page_is_what_docgen_writes():
    assert (ROOT / "docs" / "metrics.md").read_text() == metrics_page.page(), (
        "docs/metrics.md is stale: python -c 'from docgen import metrics_page; print(metrics_page.page(), end=\"\")' "
        "> docs/metrics.md"
    )


def test_every_definition_is_one_line_of_text_and_patterns_match_their_family():
    for src in metrics_page.sources():
        for key, text in src.metrics.items():
            assert text.strip() and not text.startswith(" "), f"{src.title}: {key} has no definition"
            assert metrics_page.defined(key, src.metrics)
    p = {"qhat_{k}": "", "eval_accuracy_L{level}": "", "worker{i}_busy_s": ""}
    assert metrics_page.defined("qhat_16", p) and metrics_page.defined("eval_accuracy_L3", p)
    assert metrics_page.defined("worker0_busy_s", p) and not metrics_page.defined("worker0_samples", p)
    assert not metrics_page.defined("eval_accuracy", p) and not metrics_page.defined("qhat", p)
    assert doctest.testmod(metrics_page).failed == 0


def test_a_strategy_registered_from_outside_is_left_to_its_author(monkeypatch):
    """A plugin's keys are its own to document: the page lists the package's strategies and rules only."""

    class Outside(STRATEGIES["uniform"]):
        METRICS = {"outside_key": "A plugin's."}

    Outside.__module__ = "my_plugin"
    monkeypatch.setitem(STRATEGIES, "outside", Outside)
    assert "outside_key" not in metrics_page.page() and not metrics_page.ours(Outside)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("label", RUNS)
def test_every_key_a_step_writes_is_defined_by_its_strategy(label, driver):
    strategy, keys = run(label, driver)
    defs = sampling_defs(strategy)
    missing = sorted(k for k in keys if not metrics_page.defined(k, defs))
    assert not missing, f"{label} ({driver}) writes undefined keys {missing}: define them in its class's METRICS"


def test_the_features_are_on_in_their_runs():
    """The feature runs reach the code they are meant to (else their keys would pass unseen)."""
    assert isinstance(run("uniform:select=iw", "rounds")[0], Admission)
    assert {"iw_ess", "unselected_prompts"} <= run("uniform:select=iw", "rounds")[1]
    assert {"drift_mean", "rho_mean"} <= run("uniform:forgetting=drift", "rounds")[1]
    assert "given_up_prompts" in run("seq:give_up=0.5", "streaming")[1]


@pytest.fixture(scope="module")
def trainer_run(model_dir, tmp_path_factory):
    """A one-step run with evaluation at step 0 and 1, replay and importance correction on: its lines and trainer."""
    from reinforce_ada.training.trainer import Trainer

    run_dir = tmp_path_factory.mktemp("metrics_doc") / "run"
    cfg = train_config(
        model_dir,
        run_dir,
        task={"verifier": "tests.helpers:even_length"},  # a reward a random policy earns: the update runs
        run={"steps": 1, "eval_every": 1},
        replay={"enabled": True},
        optim={"is_correction": "token_truncate"},
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.fit()
    lines = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return tr, lines


def trainer_defs(strategy: PoolStrategy) -> dict[str, str]:
    from reinforce_ada.engines import continuous
    from reinforce_ada.evaluation import metrics as evaluation
    from reinforce_ada.training import context, experience, replay, samples_log, trainer
    from reinforce_ada.training.drift import Drift

    own = trainer.METRICS | Drift.METRICS | samples_log.METRICS | context.METRICS | replay.METRICS
    own |= experience.METRICS | continuous.METRICS
    return sampling_defs(strategy) | own | evaluation.METRICS


def test_a_trainer_run_writes_only_defined_keys(trainer_run):
    tr, lines = trainer_run
    assert [m["step"] for m in lines] == [0, 1] and "eval_accuracy" in lines[1] and "update_ratio" in lines[1]
    defs = trainer_defs(tr.strategy)
    for m in lines:
        missing = sorted(k for k in m if not metrics_page.defined(k, defs))
        assert not missing, f"step {m['step']} writes undefined keys {missing}: define them beside their code"


def other_keys() -> set[str]:
    """Keys written outside these runs, read from their code directly: the Ray pool's step metrics (from its
    records; no Ray needed), the benchmark probe's (on an empty batch) and `policy_loss`'s statistics."""
    from reinforce_ada.bench.run import value_probe
    from reinforce_ada.engines.ray_pool import RayRolloutPool
    from reinforce_ada.engines.ray_state import WorkerState
    from reinforce_ada.training.losses import policy_loss

    pool = RayRolloutPool.__new__(RayRolloutPool)
    pool.workers = [WorkerState(index=i) for i in range(2)]
    pool._versions, pool._step = {0, 1}, dict(worker_restarts=0, workers_lost=0, wasted_samples=0)
    logp = torch.zeros(2, 3)
    loss = policy_loss(logp, logp, torch.tensor([1.0, -1.0]), torch.ones(2, 3))
    return set(pool.step_metrics()) | set(value_probe(4)(None, SimpleNamespace(groups=[]))) | set(loss.metrics())


def test_no_definition_is_stale(trainer_run):
    written = set().union(*(run(label, d)[1] for label in RUNS for d in DRIVERS), *trainer_run[1], other_keys())
    stale = [
        f"{src.title}: {key}"
        for src in metrics_page.sources()
        for key, text in src.metrics.items()
        if not metrics_page.conditional(text) and not any(metrics_page.pattern(key).fullmatch(k) for k in written)
    ]
    assert not stale, f"documented but written by no run (remove, or say 'Only ...:' when it is written): {stale}"


# -- docs published ---------------------------------------------------------------------------------------------------
# Generated pages validate what they publish (issue 52): `python -m docgen` refuses a study file holding a number it
# cannot publish (NaN, Infinity, 1e308), a missing field or a value of another type than the study writes -- naming
# the file and the field, in one line -- and writes text taken from JSON so that it renders as that text (no raw HTML,
# no `javascript:` link, no attribute list). The committed tree stays byte for byte what it was
# (`test_docs.py::test_committed_results_are_what_docgen_writes`).
ENTRY = {
    "what": "tokens to target",
    "value": 1.1,
    "t_lo": 0.9,
    "t_hi": 1.3,
    "per_seed": [1.0, 1.2],
    "goal": ">= 1.3 with the 90% interval above 1",
    "preregistered": True,
    "arm": "mopps",
}


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """A study `demo` under tmp_path whose summary.json a test writes (raw text: NaN and Infinity included)."""
    folder = tmp_path / "demo" / "results"
    folder.mkdir(parents=True)
    for mod in (summary, sources, page_mod):
        monkeypatch.setattr(mod, "STUDIES", tmp_path)

    def write(text: str) -> None:
        (folder / "summary.json").write_text(text)

    return write


def _page() -> Page:
    return summary.summary_page("demo", "A demo study", 1, ("L1",))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("NaN", "holds NaN"),
        ("Infinity", "holds Infinity"),
        ("-Infinity", "holds -Infinity"),
        ("1e999", "field L1.value: inf is not a publishable number"),
        ("1e308", "field L1.value: 1e+308 is not a publishable number"),
        ('"1.25"', "field L1.value: text ('1.25') where the study writes a number"),
        ("true", "field L1.value: true/false (True) where the study writes a number"),
        ("[1.2]", "field L1.value: a list where the study writes a number"),
    ],
)
def test_a_number_the_page_cannot_publish_is_an_error_naming_the_file_and_field(demo, value, says):
    demo('{"L1": ' + json.dumps(ENTRY)[:-1] + ', "value": ' + value + "}}")
    with pytest.raises(PageDataError, match="demo/results/summary.json") as e:
        _page()
    assert says in str(e.value)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({k: v for k, v in ENTRY.items() if k != "value"}, "L1: a figure with neither its value nor its pools"),
        ({"what": "C1", "goal": ">= 1.1", "pools": {}}, "L1: a figure with neither its value nor its pools"),
        ({**ENTRY, "pools": {"hard": {"arm": "mopps"}}}, "field L1.pools.hard.value is missing"),
        ({**ENTRY, "what": 3}, "field L1.what: the number 3 where the study writes text"),
        ({**ENTRY, "pools": []}, "field L1.pools: a list where the study writes an object"),
    ],
)
def test_a_claim_without_its_pools_or_a_field_of_another_type_is_an_error(demo, entry, says):
    demo(json.dumps({"L1": entry}))
    with pytest.raises(PageDataError, match="demo/results/summary.json") as e:
        _page()
    assert says in str(e.value)


HOSTILE = {
    "what": "<script>alert(1)</script> tokens, JaVaScRiPt:alert(1) {: onclick=alert(1) }",
    "goal": "[click](javascript:alert(1)) >= 1.3",
    "arm": '<img src=x onerror="alert(1)">',
    "date": "2026-01-01<!-- x -->",
}


def test_text_from_json_renders_as_text_not_html_links_or_attributes(demo):
    demo(json.dumps({"L1": {**ENTRY, **HOSTILE}}))
    text = _page().render()
    body = text.split("\n", 1)[1]  # the first line is docgen's own comment
    for raw in ("<script", "<img", "<!--", "](javascript", "javascript:", "JaVaScRiPt:", "{:"):
        assert raw not in body, raw
    assert "&lt;script>alert(1)&lt;/script> tokens, JaVaScRiPt&#58;alert(1) &#123;: onclick=alert(1) }" in body
    assert "&lt;img src=x" in body and "[click]\\(javascript&#58;alert(1))" in body and "&lt;!-- x" in body
    assert ">= 1.3" in body  # a goal's comparison is text, left as it is
    assert published.safe("1.10 [0.98, 1.23] (90%) a <= b, x > y, <code>") == (
        "1.10 [0.98, 1.23] (90%) a <= b, x > y, &lt;code>"
    )


def test_a_missing_field_a_page_reads_is_named(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"settings": {"steps": 3}, "runs": [1]}))
    doc = published.load_json(f)
    with pytest.raises(PageDataError, match=r"r.json: field settings.seeds is missing"):
        doc["settings"]["seeds"]
    with pytest.raises(PageDataError, match=r"r.json: field runs\[4\] is missing"):
        doc["runs"][4]
    doc = published.checked({"x": "high"}, "f.json")
    with pytest.raises(PageDataError, match=r"f.json: field x: 'high' is text where a number belongs"):
        f"{doc['x']:.2f}"


def _only(monkeypatch, build) -> None:
    """docgen with one study page, built by `build`."""
    module = types.ModuleType("studies.zz_demo.page")
    module.page = build
    monkeypatch.setitem(sys.modules, "studies.zz_demo.page", module)
    monkeypatch.setattr(results, "study_pages", lambda: [results.study_page("zz_demo")])


def test_docgen_names_a_damaged_file_in_one_line_and_writes_nothing(demo, tmp_path, monkeypatch, capsys):
    demo('{"L1": {"what": "x", "value": 1.')  # cut mid-file
    _only(monkeypatch, _page)
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "demo/results/summary.json: not whole JSON" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    demo(json.dumps({"L1": ENTRY}))
    (tmp_path / "demo" / "results" / "records.jsonl.gz").write_bytes(gzip.compress(b'{"kind":"run","id":"a"}\n'))
    assert main(["--check"]) == 1  # records that lost their result line: refused, not read as "nothing recorded"
    err = capsys.readouterr().err
    assert "records.jsonl.gz: 1 runs and no result line" in err and err.count("\n") == 1


def test_a_page_that_cannot_be_built_names_the_files_it_read(demo, monkeypatch):
    demo(json.dumps({"L1": ENTRY}))

    def build() -> Page:
        e = sources.read_json(sources.STUDIES / "demo" / "results" / "summary.json")["L1"]
        return Page("zz_demo", "x", 1, verdict=e["what"].upper() + e["value"])  # a type the page did not expect

    module = types.ModuleType("studies.zz_demo.page")
    module.page = build
    monkeypatch.setitem(sys.modules, "studies.zz_demo.page", module)
    with pytest.raises(PageDataError, match=r"studies/zz_demo/page.py cannot build its page from .*summary.json"):
        results.study_page("zz_demo")


def test_a_number_a_page_derives_as_nan_is_not_published(monkeypatch, capsys):
    _only(monkeypatch, lambda: Page("zz_demo", "x", 1, verdict=f"ratio {0.0 * float('inf'):.2f} of the oracle's gain"))
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/results/zz_demo.md, line" in err and "'nan' is not a number to publish" in err


def test_every_figure_cell_checks_its_numbers_wherever_it_comes_from():
    """`docgen.cells` (every results page, the speed goals, the benchmarks' tables): a value that is true/false or
    text, or an interval with one end, is an error naming the file and field, not "1.00" or "[0.90, n/a]"."""
    from docgen.cells import verdict, with_interval

    with pytest.raises(PageDataError, match=r"s.json: field P5.value: True is not a number"):
        verdict(published.checked({"P5": {"value": True}}, "s.json")["P5"], ">= 1.0")
    with pytest.raises(PageDataError, match=r"s.json: field P1.t_hi is missing beside t_lo"):
        with_interval(published.checked({"P1": {"value": 1.0, "t_lo": 0.9}}, "s.json")["P1"])
    assert with_interval(published.checked({"value": 1.0, "t_lo": 0.9, "t_hi": 1.2}, "s.json")) == "1.00 [0.90, 1.20]"
