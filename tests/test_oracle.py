"""The pass-rate oracle (issue 22): exact rates agree with sampling, the cache follows the weights, the signal
allocation is exact, the oracle arms run in the trainer and read the oracle, and everywhere else refuses it."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada.bench.arms import ARMS, PER_PROMPT_BUDGET
from reinforce_ada.engines import local_engine
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.metrics import sample_correct
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import ORACLE_STRENGTH, PassRateOracle, PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.strategies.est import allocate, allocate_counts, signal_allocate
from reinforce_ada.sampling.strategies.knapsack import knapsack_budget
from reinforce_ada.simulation.plan import plan, plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.simulation.simulate import run_arm
from reinforce_ada.tasks import arithmetic
from reinforce_ada.training.config import TrainConfig
from reinforce_ada.training.oracle import exact_oracle
from reinforce_ada.training.warm_start import SHIPPED_DIR
from reinforce_ada.types import Prompt
from tests.helpers import train_config

PAIRS = ((12, 34), (58, 67), (45, 55), (73, 19), (66, 77), (81, 9), (27, 48), (39, 26))


def P(a: int, b: int, level: int = 2) -> Prompt:
    return arithmetic.make_prompt(a, b, level, f"p{a}-{b}")


@pytest.fixture(scope="module")
def warm():
    return AutoModelForCausalLM.from_pretrained(SHIPPED_DIR).eval(), AutoTokenizer.from_pretrained(SHIPPED_DIR)


# -- (a) the oracle's rates are what sampling measures ----------------------------------------------------------------
def test_oracle_rates_match_sampled_frequencies_within_monte_carlo_error(warm):
    model, tok = warm
    torch.set_num_threads(1)
    oracle = exact_oracle(model, tok, max_new_tokens=8, temperature=1.0)
    rates = oracle.rates([P(a, b) for a, b in PAIRS])
    prompts = [P(a, b) for (a, b), r in zip(PAIRS, rates, strict=True) if 0.1 < r < 0.9]
    assert len(prompts) >= 3, rates  # informative prompts: neither always right nor always wrong
    exact = oracle.rates(prompts)
    eng = local_engine(
        model, tok, decode="auto", streaming=False, slots=256, batch_size=512, max_new_tokens=8, temperature=1.0, seed=5
    )
    n = 400
    correct, errors = sample_correct(eng, prompts, arithmetic.verify, samples=n)
    sampled = np.array([np.mean(correct[p.id]) for p in prompts])
    assert errors == 0
    assert np.all(np.abs(sampled - exact) <= 4 * np.sqrt(exact * (1 - exact) / n) + 1e-3), (sampled, exact)


# -- (b) the cache: one batched call per uncached set, stale after new weights ---------------------------------------
def test_prefetch_is_one_batched_call_and_invalidate_forgets():
    seen: list[list[str]] = []
    level = {"a": 0.2, "b": 0.7, "c": 1.0}

    def rates(prompts):
        seen.append([p.id for p in prompts])
        return np.array([level[p.id] for p in prompts])

    oracle = PassRateOracle(rates)
    a, b, c = (Prompt(id=i, text=i) for i in "abc")
    oracle.prefetch([a, b, a, c])
    assert seen == [["a", "b", "c"]]  # duplicates asked once, in one call
    assert oracle.rates([c, a]).tolist() == [1.0, 0.2] and oracle.rate(b) == 0.7 and len(seen) == 1
    level["a"] = 0.9
    assert oracle.rate(a) == 0.2  # cached for this policy version
    oracle.invalidate()
    assert oracle.rate(a) == 0.9 and oracle.version == 1 and seen[-1] == ["a"]
    bad = PassRateOracle(lambda ps: np.array([1.5] * len(ps)))
    with pytest.raises(ValueError, match="must be in \\[0, 1\\]"):
        bad.rate(a)


def test_invalidate_after_a_weight_change_changes_the_rates(warm):
    model, tok = copy.deepcopy(warm[0]), warm[1]
    oracle = exact_oracle(model, tok, max_new_tokens=8, temperature=1.0)
    prompts = [P(a, b) for a, b in PAIRS[:4]]
    before = oracle.rates(prompts)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(0.5)  # a flatter policy: every exact rate moves
    assert np.array_equal(oracle.rates(prompts), before) and oracle.calls == 1  # stale until told
    oracle.invalidate()
    after = oracle.rates(prompts)
    assert oracle.calls == 2 and np.all(np.abs(after - before) > 1e-6)


# -- (c) allocation=signal is the exact optimum ----------------------------------------------------------------------
def _signal(p: np.ndarray, n: np.ndarray) -> float:
    return float(np.sum(1.0 - p**n - (1.0 - p) ** n))


def test_signal_allocation_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(60):
        b = int(rng.integers(1, 4))
        lo = int(rng.integers(1, 3))
        hi = lo + int(rng.integers(0, 5))
        p = rng.choice([0.0, 1.0, *rng.random(6)], size=b)
        for budget in range(lo * b, hi * b + 1):
            got = signal_allocate(p, budget, lo, hi)
            assert got.sum() == budget and got.min() >= lo and got.max() <= hi
            best = max(
                _signal(p, np.array(n)) for n in itertools.product(range(lo, hi + 1), repeat=b) if sum(n) == budget
            )
            assert _signal(p, got) == pytest.approx(best, abs=1e-12), (p, budget, lo, hi, got)


def test_signal_allocation_outside_the_feasible_budget_clips_like_the_other_rules():
    p = np.array([0.3, 0.5, 0.9])
    cfg = strategy_config(name="est", allocation="signal", min_samples=4, max_samples=8)
    under, over = (
        allocate_counts(p, cfg.options, 5),
        allocate_counts(p, cfg.options, 100),
    )  # below B * min, above B * max
    assert under.tolist() == allocate(np.ones(3), 5, 4, 8).tolist() == [4, 4, 4]
    assert over.tolist() == allocate(np.ones(3), 100, 4, 8).tolist() == [8, 8, 8]
    rows = plan(cfg.replace(budget=18), [0.3, 0.5, 0.9])  # `reinforce-ada plan` uses the same rule
    assert sum(r.expected_samples for r in rows) == pytest.approx(18)
    assert rows[1].expected_samples <= rows[0].expected_samples <= rows[2].expected_samples  # p=0.5 needs fewest


# -- (d) the memory reads the oracle; without one, a clear error -----------------------------------------------------
def test_memory_reads_the_oracle_and_refuses_without_one():
    cfg = strategy_config(name="uniform", estimator="oracle", select="mopps")
    memory = PromptMemory(cfg.options)
    assert memory.predictor is None
    x = Prompt(id="x", text="x")
    with pytest.raises(ConfigError, match="exact-answer tasks"):
        memory.posterior(x)
    memory.attach(oracle=PassRateOracle(lambda ps: np.array([0.0 if p.id == "x" else 0.25 for p in ps])))
    a, b = memory.posterior(x)
    assert a > 0 and b > 0 and a + b == pytest.approx(ORACLE_STRENGTH)  # numpy's beta needs both > 0 at p = 0
    assert memory.estimate(x) == 0.0 and memory.estimate(Prompt(id="y", text="y")) == 0.25
    assert set(memory.state_dict()) == set(
        PromptMemory(make_options(Options)).state_dict()
    )  # nothing of the oracle is checkpointed


def test_a_strategy_without_an_oracle_fails_at_its_first_read():
    prompts = [Prompt(id=f"q{i}", text="") for i in range(40)]
    engine = SimulatedPolicy(prompts, np.linspace(0.0, 1.0, 40), SimConfig(lr=0.0))
    strategy = build_strategy(parse_arm(ARMS["oracle-select"]))
    with pytest.raises(ConfigError, match="estimator='oracle' needs a pass-rate oracle"):
        collect(strategy, engine, prompts[:2], more_prompts=lambda k: prompts[2 : 2 + k])


def test_simulated_oracle_selection_picks_the_prompts_nearest_one_half():
    prompts = [Prompt(id=f"q{i}", text="") for i in range(64)]
    rates = np.linspace(0.0, 1.0, 64)
    engine = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0))
    strategy = build_strategy(parse_arm(ARMS["oracle-select"]).replace(candidates=16))
    strategy.attach(oracle=engine.oracle())
    batch = collect(strategy, engine, prompts[:4], more_prompts=lambda k: prompts[4 : 4 + k])
    chosen = sorted(int(g.prompt.id[1:]) for g in batch.groups)
    assert chosen == sorted(np.argsort(np.abs(rates - 0.5))[:4].tolist())


def test_knapsack_reads_the_oracle_in_place_of_its_reward_buffer():
    prompts = [Prompt(id=f"q{i}", text="") for i in range(6)]
    rates = np.array([0.0, 0.1, 0.3, 0.5, 0.8, 1.0])
    engine = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0))
    strategy = build_strategy(strategy_config(name="knapsack", estimator="oracle", min_samples=2, max_samples=16))
    strategy.attach(oracle=engine.oracle())
    collect(strategy, engine, prompts)
    want = knapsack_budget(rates.tolist(), 48, 2, 16)  # a first visit: no reward buffer, yet the exact rates are used
    assert [strategy.alloc[p.id] for p in prompts] == want.tolist()


def test_simulated_runs_refresh_the_oracle_after_each_update(monkeypatch):
    made: list[PassRateOracle] = []
    original = SimulatedPolicy.oracle
    monkeypatch.setattr(SimulatedPolicy, "oracle", lambda self: made.append(original(self)) or made[-1])
    prompts = [Prompt(id=f"q{i}", text="") for i in range(32)]
    rates = np.linspace(0.05, 0.95, 32)
    for arm in ("oracle-select", "oracle-alloc", "oracle-both"):
        cfg = parse_arm(ARMS[arm])
        cfg = cfg.replace(candidates=4) if "candidates" in cfg.to_dict() else cfg  # a ranking rule's option
        cfg = cfg.replace(budget=PER_PROMPT_BUDGET[arm] * 4) if arm in PER_PROMPT_BUDGET else cfg
        curve = run_arm(cfg, prompts, rates, steps=3, batch_size=4, seed=0, sim=SimConfig(lr=0.5))
        assert len(curve["pass_rate"]) == 4 and curve["pass_rate"][-1] != curve["pass_rate"][0]
        assert made[-1].version == 3 and made[-1].calls == 3  # invalidated after every update, read every step
        if arm in PER_PROMPT_BUDGET:
            assert curve["samples_per_step"] == [16.0, 16.0, 16.0]


def test_plan_of_give_up_with_the_oracle_matches_its_monte_carlo():
    cfg = strategy_config(name="seq", give_up=0.2, estimator="oracle")  # knowing p = 0.02, give up early
    exact = plan(cfg, [0.02, 0.4])
    mc = plan_monte_carlo(cfg, [0.02, 0.4], reps=1000)
    assert exact[0].expected_samples < plan(cfg.replace(estimator="tracker"), [0.02])[0].expected_samples
    for e, m in zip(exact, mc, strict=True):
        assert abs(e.zero_signal - m.zero_signal) <= 4 * m.stderr + 1e-3
        assert e.expected_samples == pytest.approx(m.expected_samples, rel=0.05)


# -- (e) the integrations refuse it ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_trl_refuses_the_oracle(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    args = AdaGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, num_generations=4, per_device_train_batch_size=8, estimator="oracle"
    )
    with pytest.raises(ConfigError, match="estimator='oracle' is not supported by AdaGRPOTrainer"):
        AdaGRPOTrainer(model="unused", reward_funcs=[], args=args)


def test_verl_driver_refuses_the_oracle():
    pytest.importorskip("tensordict")
    from reinforce_ada.integrations.verl_driver import StepDriver

    with pytest.raises(ConfigError, match="ada.estimator='oracle'"):
        StepDriver(strategy_config(name="uniform", estimator="oracle"), fetch_batch=list, dispatch=print)


# -- (f) the oracle arms in the trainer ------------------------------------------------------------------------------
def _cfg(run_dir: Path, arm: str, **task) -> TrainConfig:
    budget = PER_PROMPT_BUDGET.get(arm)
    strategy = parse_arm(ARMS[arm])
    if budget is not None:
        strategy = strategy.replace(budget=budget * 4)  # 4 prompts per step
    return train_config(
        SHIPPED_DIR,
        run_dir,
        strategy,
        task={"train_size": 256, "eval_size": 4, **task},
        generation={"max_new_tokens": 8},
        run={"steps": 1},
    )


@pytest.mark.parametrize("arm", ["oracle-select", "oracle-alloc", "oracle-both"])
def test_one_trainer_step_of_each_oracle_arm_reads_the_oracle(tmp_path, arm):
    from reinforce_ada.training.trainer import Trainer

    tr = Trainer(_cfg(tmp_path / "run", arm), tensorboard=False)
    calls: list[tuple[list[str], np.ndarray]] = []
    exact = tr.oracle._rates

    def recording(prompts):
        out = exact(prompts)
        calls.append(([p.id for p in prompts], out))
        return out

    tr.oracle._rates = recording
    try:
        m = tr.train_step()
    finally:
        tr.close()
    assert tr.oracle.version == 1 and not tr.oracle.cache  # new weights: the cached rates are gone
    assert len(calls) == 1  # every estimate of the step came from one batched call
    rate = dict(zip(calls[0][0], calls[0][1].tolist(), strict=True))
    trained = list(tr.strategy.prompts)
    assert len(trained) == 4 and set(trained) <= set(rate)
    if arm != "oracle-alloc":  # selection: 16 candidates per prompt, the 4 nearest 0.5 kept (Thompson noise ~1e-3)
        assert len(rate) == 64
        far = max(abs(rate[i] - 0.5) for i in trained)
        assert far <= min(abs(r - 0.5) for i, r in rate.items() if i not in trained) + 5e-3
    if arm != "oracle-select":
        assert m["p_hat_mean"] == pytest.approx(np.mean([rate[i] for i in trained]), rel=1e-12)
        assert m["budget_used"] == 16  # GRPO-n4's budget


def test_trainer_refuses_the_oracle_on_a_task_without_exact_answers(tmp_path):
    from reinforce_ada.training.trainer import Trainer

    with pytest.raises(ConfigError, match="task.verifier='numeric'.*not exact-match"):
        Trainer(_cfg(tmp_path / "run", "oracle-alloc", verifier="numeric"), tensorboard=False)


def test_the_alloc_arm_is_the_oracle_allocation_on_beliefs():
    """`alloc` (issue 23) = oracle-alloc's rule and budget with the tracker + predictor instead of the exact rate: at a
    fixed belief it allocates exactly as the oracle would at those rates, and it spends GRPO-n4's samples."""
    alloc, oracle = parse_arm(ARMS["alloc"]), parse_arm(ARMS["oracle-alloc"])
    assert alloc.replace(estimator="oracle") == oracle and alloc.options.estimator == "both"
    assert PER_PROMPT_BUDGET["alloc"] == PER_PROMPT_BUDGET["oracle-alloc"] == 4
    prompts = [Prompt(id=f"q{i}", text="") for i in range(16)]
    curve = run_arm(
        alloc.replace(budget=16),
        prompts,
        np.linspace(0.05, 0.95, 16),
        steps=3,
        batch_size=4,
        seed=0,
        sim=SimConfig(lr=0.5),
    )
    assert curve["samples_per_step"] == [16.0, 16.0, 16.0]
