"""Group-free baselines and SPO: the baselines every strategy can take (leave-one-out, the tracker), batch
normalisation, the tracker's priors (flat, level, a pass-rate file, SPO's forgotten prior), SPO's prioritised draw,
and the `spo` strategy through both drivers, a checkpoint and a trainer step."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.priority import priority_weights
from reinforce_ada.sampling.advantages import ADVANTAGES, batch_normalize, compute_advantages
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Group, Prompt, Sample
from tests.helpers import train_config


# -- unbiasedness: exact expectations over every outcome of n Bernoulli(p) samples -----------------------------------
def expected_gradient(name: str, p: float, n: int, baseline: float | None = None) -> float:
    """E[sum_i A_i (y_i - p)] / n: the score-function estimate of d E[r] / d logit for a Bernoulli(p) policy (the true
    gradient is p (1 - p)), enumerated exactly over the 2^n outcomes."""
    total = 0.0
    for ys in itertools.product([0.0, 1.0], repeat=n):
        y = np.array(ys)
        prob = float(np.prod(np.where(y == 1, p, 1 - p)))
        adv = ADVANTAGES[name](y, y, std=False, baseline=baseline)
        total += prob * float((adv * (y - p)).sum()) / n
    return total


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("n", [2, 4])
def test_a_baseline_independent_of_the_sample_keeps_the_gradient_unbiased(p, n):
    true = p * (1 - p)
    assert expected_gradient("leave_one_out", p, n) == pytest.approx(true)
    for v in (0.2, 0.7):  # the tracker's value is fixed before the step: any v is unbiased
        assert expected_gradient("tracker", p, n, baseline=v) == pytest.approx(true)
    # the group's own mean includes the sample it scores: the gradient shrinks by (n - 1) / n
    assert expected_gradient("group", p, n) == pytest.approx(true * (n - 1) / n)
    assert expected_gradient("tracker", p, 1, baseline=0.3) == pytest.approx(true)  # a group of one still learns
    assert expected_gradient("leave_one_out", p, 1) == 0.0  # ... where leave-one-out has no other sample


@pytest.mark.parametrize("name", ["uniform", "dynamic"])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_leave_one_out_is_unbiased_under_strategies_whose_std_scaling_is_on(name, p):
    """uniform and dynamic default to scale_std (GRPO's); with advantage=leave_one_out they trained RLOO divided by
    the group's std, which includes the sample it scales: biased (issue 51). RLOO is never scaled now."""
    from reinforce_ada.sampling.ledger import step_advantages

    opts = strategy_config(name, advantage="leave_one_out").options
    assert opts.scale_std  # the strategy's own default is still on: leave-one-out ignores it
    n, total = 4, 0.0
    for ys in itertools.product([0.0, 1.0], repeat=n):
        y = np.array(ys)
        prob = float(np.prod(np.where(y == 1, p, 1 - p)))
        group = Group(Prompt("x", "x"), [Sample(prompt_id="x", text="", reward=r) for r in ys], list(ys))
        (adv,), _ = step_advantages(opts, [group])
        total += prob * float((adv * (y - p)).sum()) / n
    assert total == pytest.approx(p * (1 - p))


def test_an_informative_prior_enters_spo_with_the_recipes_strength_of_eight(tmp_path):
    """The recipe's offline prior has N_init = 1 / (1 - rho_min) = 8 pseudo-samples; 0.4 gave a file's (or a measured
    pass's) mean SPO's flat strength, alpha + beta = 1 (issue 51). `prior_strength` sets it; SPO's default is 8."""
    f = tmp_path / "rates.jsonl"
    f.write_text('{"id": "a", "pass_rate": 0.25}\n')
    a, other = Prompt("a", "a"), Prompt("b", "b")
    spo = PromptMemory(strategy_config("spo", prior_file=str(f)).options)
    assert spo.posterior(a) == pytest.approx((2.0, 6.0)) and spo.posterior(other) == pytest.approx((0.5, 0.5))
    measured = PromptMemory(strategy_config("spo").options)
    measured.attach(prior_rates={"a": 0.75})  # a prior pass measured by sampling (`bench.run.prior_pass`)
    assert measured.posterior(a) == pytest.approx((6.0, 2.0))
    own = PromptMemory(strategy_config("uniform", prior_file=str(f), prior_strength=4.0).options)
    assert own.posterior(a) == pytest.approx((1.0, 3.0))
    assert PromptMemory(strategy_config("uniform", prior_file=str(f)).options).posterior(a) == pytest.approx((0.5, 1.5))
    with pytest.raises(ConfigError, match="prior_strength=0.0 is out of range"):
        strategy_config("spo", prior_strength=0.0)


def test_the_tracker_baseline_centres_partial_credit_rewards():
    """The tracker counted correct samples (reward > threshold) but the advantage subtracted its estimate from the raw
    reward: a prompt always scoring 0.4 (partial credit, never correct) kept A = 0.4 - v_hat with v_hat -> 0, a
    permanent push (issue 51). The value tracks the mean reward: A -> 0; the pass rate stays what allocation reads."""

    class Constant:  # every sample of every prompt scores 0.4
        def generate(self, requests):
            out = []
            for r in requests:
                out += [Sample(prompt_id=r.prompt.id, text="", reward=0.4, num_tokens=1) for _ in range(r.k)]
            return out

    prompts = [Prompt(f"q{i}", f"q{i}") for i in range(4)]
    s = build_strategy(strategy_config("spo", n=2, select="none"))
    for _ in range(12):
        batch = collect(s, Constant(), prompts)
    adv = np.concatenate(batch.advantages) if batch.advantages else np.zeros(0)
    assert s.memory.estimate(prompts[0]) < 0.05  # the pass rate: never correct
    assert s.memory.value(prompts[0]) == pytest.approx(0.4, abs=0.02)  # the mean reward
    raw = [0.4 - s.values[p.id] for p in prompts]  # before batch normalisation
    assert max(abs(x) for x in raw) < 0.02 and np.all(np.isfinite(adv))
    m = PromptMemory(strategy_config("uniform").options)  # 0/1 rewards: value and estimate are one number
    m.record(prompts[0], [True, False, False], rewards=[1.0, 0.0, 0.0])
    assert m.value(prompts[0]) == m.estimate(prompts[0]) and "mass" not in m.tracker.state_dict()


def test_the_tracker_baseline_needs_a_value_and_scales_by_the_bernoulli_std():
    with pytest.raises(ConfigError, match="Group.baseline"):
        ADVANTAGES["tracker"](np.array([1.0]), np.array([1.0]), std=False, baseline=None)
    out = ADVANTAGES["tracker"](np.array([1.0, 0.0]), None, std=True, eps=0.0, baseline=0.2)
    assert out.tolist() == pytest.approx([0.8 / 0.4, -0.2 / 0.4])


def _group(pid: str, rewards: list[float], tokens: list[int]) -> Group:
    samples = [Sample(pid, "", [], [], t, "eos", r, 0, i) for i, (r, t) in enumerate(zip(rewards, tokens, strict=True))]
    return Group(Prompt(pid, pid), samples, rewards, baseline=0.5)


def test_batch_normalisation_by_samples_and_by_tokens():
    groups = [_group("a", [1.0, 0.0], [1, 9]), _group("b", [1.0], [10])]
    advs, _ = compute_advantages(groups, estimator="tracker", std=False)
    flat = np.concatenate(advs)  # [0.5, -0.5, 0.5]
    by_samples = np.concatenate(batch_normalize(groups, advs, "samples"))
    assert by_samples == pytest.approx((flat - flat.mean()) / flat.std(ddof=1), abs=1e-6)
    w = np.array([1, 9, 10.0])
    mu = (w * flat).sum() / w.sum()
    by_tokens = np.concatenate(batch_normalize(groups, advs, "tokens"))
    assert by_tokens == pytest.approx((flat - mu) / np.sqrt((w * (flat - mu) ** 2).sum() / w.sum()), abs=1e-6)
    assert batch_normalize(groups, advs, "none") is advs
    with pytest.raises(ConfigError, match="batch_normalize='batch' is not valid"):
        strategy_config("uniform", batch_normalize="batch")


# -- priors -----------------------------------------------------------------------------------------------------------
def test_the_prior_comes_from_a_file_the_level_or_stays_flat(tmp_path):
    f = tmp_path / "rates.jsonl"
    f.write_text('{"id": "a", "pass_rate": 0.25}\n{"prompt": "2+2=", "pass_rate": 1.0, "samples": 8}\n')
    m = PromptMemory(strategy_config("uniform", prior_file=str(f), prior_alpha=2, prior_beta=2).options)
    a, b, c = Prompt("a", "x"), Prompt("z", "2+2="), Prompt("q", "y", level=3)
    assert m.posterior(a) == pytest.approx((1.0, 3.0))  # mean 0.25 at strength 4
    assert m.estimate(b) == pytest.approx(8.5 / 9)  # (k + 1/2) / (n0 + 1), SPO's smoothing
    assert m.posterior(c) == pytest.approx((2.0, 2.0))  # not in the file: the flat prior
    lv = PromptMemory(strategy_config("uniform", estimator="level").options)
    lv.record(Prompt("p1", "u", level=3), [True, True, True, False])
    assert lv.estimate(c) == pytest.approx((4 / 6 * 2) / 2)  # its level's (3 + 1) / (4 + 2), strength 2
    assert lv.estimate(Prompt("other", "v", level=1)) == pytest.approx(0.5)
    again = PromptMemory(strategy_config("uniform", estimator="level").options)
    again.load_state_dict(json.loads(json.dumps(lv.state_dict())))
    assert again.estimate(c) == lv.estimate(c)


@pytest.mark.parametrize(
    "content, match",
    [
        ('{"id": "a"}\n', "needs a numeric 'pass_rate'"),
        ('{"id": "a", "pass_rate": 1.5}\n', r"pass_rate=1.5 must be a number in \[0, 1\]"),
        ('{"pass_rate": 0.5}\n', "needs an 'id' or a 'prompt'"),
        ('{"id": "a", "pass_rate": 0.5, "samples": 0}\n', "samples=0 must be a whole number"),
        ("not json\n", "not a JSON object"),
        ("", "holds no rows"),
    ],
)
def test_a_bad_prior_file_is_refused_naming_the_row(tmp_path, content, match):
    f = tmp_path / "rates.jsonl"
    f.write_text(content)
    with pytest.raises(ConfigError, match=match):
        PromptMemory(strategy_config("spo", prior_file=str(f)).options)
    with pytest.raises(ConfigError, match="does not exist"):
        PromptMemory(strategy_config("spo", prior_file=str(tmp_path / "missing.jsonl")).options)


def test_a_json_prior_file_may_be_one_array_of_rows(tmp_path):
    from reinforce_ada.sampling.memory import read_prior_file

    f = tmp_path / "rates.json"
    f.write_text('[{"id": "q0", "pass_rate": 0.5}, {"prompt": "2+2=", "p": 1.0}]')
    assert read_prior_file(f) == {"q0": 0.5, "2+2=": 1.0}
    f.write_text('{"id": "q0", "pass_rate": 0.5}\n{"id": "q1", "pass_rate": 0.25}\n')  # JSON Lines still read
    assert read_prior_file(f) == {"q0": 0.5, "q1": 0.25}
    f.write_text('[{"id": "q0", "pass_rate": 0.5},')
    with pytest.raises(ConfigError, match="not a JSON array of rows"):
        read_prior_file(f)
    f.write_text('[{"id": "q0", "pass_rate": 7}]')
    with pytest.raises(ConfigError, match=r"row 1: pass_rate=7.0 must be a number in \[0, 1\]"):
        read_prior_file(f)


def test_a_prior_file_that_knows_no_training_prompt_is_refused_and_a_partial_one_said(tmp_path):
    from reinforce_ada.sampling.memory import coverage_note, read_prior_file

    f = tmp_path / "rates.jsonl"
    f.write_text('{"id": "x0", "pass_rate": 0.25}\n{"prompt": "2+2=", "pass_rate": 1.0}\n')
    rates = read_prior_file(f)
    prompts = [Prompt("a", "1+1="), Prompt("b", "2+2=")]
    assert coverage_note(rates, prompts[1:], str(f)) is None  # every one known (by text)
    assert "knows 1 of 2 training prompts; the other 1 start from the estimator's prior" in coverage_note(
        rates, prompts, str(f)
    )
    with pytest.raises(ConfigError, match=r"none of the 1 training prompts is in it .* id 'a'"):
        coverage_note(rates, prompts[:1], str(f))
    assert coverage_note(None, prompts, None) is None


def test_spos_prior_is_forgotten_with_the_counts():
    keep = PromptMemory(make_options(Options, prior_alpha=4, prior_beta=4, decay=0.5))
    spo = PromptMemory(make_options(Options, prior_alpha=4, prior_beta=4, decay=0.5, prior_decays=True))
    p = Prompt("a", "x")
    for m in (keep, spo):
        for _ in range(6):
            m.record(p, [True])
    assert keep.estimate(p) == pytest.approx((2 - 2 / 64 + 4) / (2 - 2 / 64 + 8))  # fixed pseudo-counts stay
    # SPO: alpha <- rho alpha + r, beta <- rho beta: after 6 visits beta = 4 / 64
    assert spo.posterior(p) == pytest.approx((4 / 64 + 2 - 2 / 64, 4 / 64))
    assert spo.estimate(p) > 0.95 > keep.estimate(p)


# -- SPO's draw and the strategy --------------------------------------------------------------------------------------
def test_priority_draws_prefer_uncertain_prompts_without_replacement():
    assert priority_weights(np.array([0.0, 0.5, 1.0]), 0.05) == pytest.approx([0.05, 0.55, 0.05])
    prompts = [Prompt(f"p{i}", "") for i in range(40)]
    rates = [0.0] * 20 + [0.5] * 20
    policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=0))
    s = build_strategy(parse_arm("uniform:n=2,select=priority,estimator=oracle,candidates=4,seed=1"))
    s.attach(oracle=policy.oracle())
    order = PromptOrder(prompts, 0)
    chosen = []
    for _ in range(10):
        batch = collect(s, policy, order.take(8), more_prompts=lambda k: order.take(k, exclude=s.prompts))
        ids = [g.prompt.id for g in batch.groups]
        assert len(ids) == len(set(ids)) == 8
        chosen += ids
    share = np.mean([int(pid[1:]) >= 20 for pid in chosen])
    assert share > 0.8  # weight 0.55 vs 0.05 per prompt: about 92% of draws
    # without a source of more prompts the draw has nothing to rank: every prompt offered is trained, and it says so
    with pytest.warns(
        UserWarning,
        match=r"strategy 'uniform' asked for 24 more prompt\(s\) \(candidates to rank.*works with the 8 offered",
    ):
        batch = collect(s, policy, order.take(8))
    assert len(batch.groups) == 8


def test_spo_defaults_one_sample_the_tracker_and_its_draw():
    cfg = strategy_config("spo")
    o = cfg.options
    assert (o.n, o.advantage, o.batch_normalize, o.select, o.prior_decays) == (
        1,
        "tracker",
        "samples",
        "priority",
        True,
    )
    assert (
        parse_arm("spo:select=none").options.select == "none"
    )  # SPO with uniform draws is a control, not a contradiction
    with pytest.raises(ConfigError, match="contradicts"):
        parse_arm("mopps:select=priority")


@pytest.mark.parametrize("spec", ["spo", "spo:n=4,select=none", "uniform:n=2,advantage=tracker"])
def test_every_sample_carries_signal_and_the_baseline_is_the_value_before_the_step(spec):
    prompts = [Prompt(f"p{i}", "", level=1 + i % 3) for i in range(64)]
    rates = np.random.default_rng(0).uniform(0.05, 0.95, 64)
    policy = SimulatedPolicy(prompts, rates.tolist(), SimConfig(lr=0.0, seed=0))
    s = build_strategy(parse_arm(spec))
    order = PromptOrder(prompts, 0)
    before = {}
    for step in range(4):
        take = order.take(16)
        before = {p.id: s.memory.estimate(p) for p in prompts}
        batch = collect(s, policy, take, more_prompts=lambda k: order.take(k, exclude=s.prompts))
        for g in batch.groups:
            assert g.baseline == pytest.approx(before[g.prompt.id])  # not yet moved by this step's samples
        assert batch.ledger.no_signal_prompt_share == 0.0 or step == 0
    state = json.loads(json.dumps(s.state_dict()))
    twin = build_strategy(parse_arm(spec))
    twin.load_state_dict(state)
    assert twin.state_dict() == state and twin.memory.tracker.counts == s.memory.tracker.counts


def test_spo_trains_a_step_of_one_sample_per_prompt_and_resumes_its_tracker(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer

    cfg = train_config(model_dir, tmp_path / "run", {"name": "spo", "candidates": 2}, run={"steps": 2, "save_every": 1})
    tr = Trainer(cfg, tensorboard=False)
    m = tr.train_step()
    assert m["samples_generated"] == 4 and m["samples_trained"] == 4 and math.isfinite(m["loss"])
    tr.save()
    counts = dict(tr.strategy.memory.tracker.counts)
    tr.close()
    again = Trainer(cfg, tensorboard=False)
    assert again.resume() and again.strategy.memory.tracker.counts == counts and again.step == 1
    again.close()


# -- SPO's KL-adaptive forgetting -------------------------------------------------------------------------------------
def test_drift_forgetting_discounts_by_the_policys_movement_on_the_last_response():
    from reinforce_ada.sampling.memory import rho_of

    m = PromptMemory(strategy_config("spo", forgetting="drift").options)
    calls = []

    def scorer(prompts, completions):  # the policy moved by 0.06 per token on every earlier response
        calls.append([p.id for p in prompts])
        return [[lp - 0.06 for lp in m.drift.last[p.id][1]] for p in prompts]

    m.attach(scorer=scorer)
    p = Prompt("a", "x")
    m.drift.prepare([p])
    m.record(p, [True], response=([5, 6], [-0.5, -0.7]))  # first visit: nothing to score, rho_max
    assert calls == [] and m.tracker.counts["a"] == pytest.approx((1 + 0.96 * 0.5, 1 + 0.96 * 1.0))
    m.new_step()
    m.drift.prepare([p])
    assert calls == [["a"]] and m.drift.metrics()["drift_mean"] == pytest.approx(0.06)
    before = m.tracker.counts["a"]
    m.record(p, [False], response=([7], [-0.1]))
    rho = rho_of(0.06, 0.06, 0.875, 0.96)  # 2^-1 clipped to 0.875
    assert rho == 0.875 and m.tracker.counts["a"] == pytest.approx((rho * before[0], rho * before[1] + 1))
    again = PromptMemory(strategy_config("spo", forgetting="drift").options)
    again.load_state_dict(json.loads(json.dumps(m.state_dict())))
    assert again.drift.last == m.drift.last and again.tracker.counts == m.tracker.counts


def test_drift_needs_a_scorer_and_the_integrations_refuse_it():
    from reinforce_ada.sampling.memory import refuse_drift

    prompts = [Prompt(f"p{i}", "") for i in range(8)]
    policy = SimulatedPolicy(prompts, [0.5] * 8, SimConfig(lr=0.0, seed=0))
    s = build_strategy(parse_arm("spo:forgetting=drift,select=none"))
    collect(s, policy, prompts)  # first visits: nothing to score yet
    with pytest.raises(ConfigError, match="forgetting='drift' needs the policy's log-probs"):
        collect(s, policy, prompts)
    with pytest.raises(ConfigError, match="ada.forgetting='drift' is not supported by the verl plugin"):
        refuse_drift("drift", "the verl plugin", option="ada.forgetting")
    with pytest.raises(ConfigError, match=r"forgetting='kl' is not valid; choose one of \['fixed', 'drift'\]"):
        strategy_config("spo", forgetting="kl")
    with pytest.raises(ConfigError, match="rho_min=0.99, rho_max=0.9"):
        strategy_config("spo", forgetting="drift", rho_min=0.99, rho_max=0.9)


def test_drift_in_the_simulator_and_the_trainer(model_dir, tmp_path):
    from reinforce_ada.simulation.simulate import simulate
    from reinforce_ada.training.trainer import Trainer

    res = simulate(["spo:forgetting=drift", "spo"], steps=6, seeds=1, batch_size=16, pool_size=40)
    assert len(res["arms"]) == 2
    cfg = train_config(
        model_dir, tmp_path / "run", {"name": "spo", "forgetting": "drift", "candidates": 1}, task={"train_size": 4}
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.train_step()
    m = tr.train_step()  # every prompt comes back: its drift is measured
    tr.close()
    assert m["drift_mean"] >= 0 and 0.875 <= m["rho_mean"] <= 0.96 and math.isfinite(m["loss"])


def test_a_second_sample_only_where_the_tracker_is_unsure():
    """`second_sample_sd`: n + 1 samples for a prompt whose value belief is wide when it joins the step, n otherwise;
    decided from the belief alone, so the cost is one unit per prompt plus the extra draws."""
    from reinforce_ada.sampling.strategies.uniform import belief_sd

    prompts = [Prompt(f"q{i}", f"q{i}") for i in range(8)]
    policy = SimulatedPolicy(prompts, [0.5] * 8, SimConfig(lr=0.0, seed=0))
    s = build_strategy(strategy_config("spo", second_sample_sd=0.3, select="none"))
    first = collect(s, policy, prompts)
    assert first.ledger.samples_generated == 16 and first.ledger.extra["second_samples"] == 8  # cold: Beta(1/2, 1/2)
    for _ in range(6):
        later = collect(s, policy, prompts)
    sds = [belief_sd(*s.memory.posterior(p)) for p in prompts]
    assert all(x < 0.3 for x in sds) and later.ledger.samples_generated == 8  # sure now: one sample each
    twin = build_strategy(strategy_config("spo", second_sample_sd=0.3, select="none"))
    twin.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert twin.state_dict() == s.state_dict()
    off = build_strategy(strategy_config("spo", select="none"))
    assert collect(off, policy, prompts).ledger.samples_generated == 8 and "second_samples" not in off.metrics()
    with pytest.raises(ConfigError, match=r"second_sample_sd=0.7 is out of range; it must be in \[0, 0.5\)"):
        strategy_config("uniform", second_sample_sd=0.7)


def test_an_a_star_po_style_arm_keeps_a_static_offline_value_and_drops_what_it_never_solved(
    model_dir, tmp_path, tiny_llama, char_tokenizer
):
    """`a-star-po-64`: 8 offline samples per prompt (charged), V* = beta log mean exp(r / beta), the prompts none of
    whose samples was correct dropped, one sample per prompt and A = r - V*, never updated by visits
    (estimator=prior)."""
    from reinforce_ada.bench.arms import resolve_arms
    from reinforce_ada.bench.run import A_STAR_BETA, run_job
    from reinforce_ada.bench.testbed import build_pool, parse_pool
    from tests.helpers import bench_job

    m = PromptMemory(strategy_config("spo", estimator="prior").options)
    m.attach(prior_rates={"a": 0.3})
    a = Prompt("a", "a")
    m.record(a, [True, True, True], rewards=[1.0, 1.0, 1.0])
    assert m.value(a) == pytest.approx(0.3, abs=1e-5) and m.estimate(Prompt("b", "b")) == pytest.approx(0.5)
    (_, arm), _ = resolve_arms(["grpo-n4", "a-star-po-64"])
    pool = build_pool(parse_pool("p=arithmetic:weights=1/1/1/0/0/0/0,size=24"), tiny_llama, char_tokenizer, tmp_path)
    job = bench_job(pool, model_dir, tmp_path / "run", arm.name, arm.cfg, train=arm.train, steps=1, batch_size=4)
    rec = run_job(job)
    assert rec["prior"]["samples"] == 8 * 24 and rec["eval_tokens"][0] == rec["prior"]["tokens"]  # charged
    k = 8  # every prompt solved 8 times out of 8 gets V* = 1; none: 0 (dropped)
    assert A_STAR_BETA * math.log((k * math.exp(1 / A_STAR_BETA)) / k) == pytest.approx(1.0)


def test_the_prior_pass_softmax_value_and_the_unsolved_filter(tmp_path):
    from reinforce_ada.bench.run import A_STAR_BETA, prior_pass
    from reinforce_ada.training.trainer import Trainer
    from reinforce_ada.training.warm_start import SHIPPED_DIR

    model_dir = SHIPPED_DIR  # the warm start solves some prompts and not others: both sides of the filter
    spo = {"name": "spo", "estimator": "prior", "select": "none"}
    cfg = train_config(model_dir, tmp_path / "run", spo, generation={"max_new_tokens": 8})
    tr = Trainer(cfg, tensorboard=False)
    before = list(tr.train_prompts)
    spent = prior_pass(tr, 4, "softmax", drop_unsolved=True)
    tokens, samples = spent["tokens"], spent["samples"]
    rates = tr.strategy.memory.prior_rates
    tr.close()
    assert samples == 4 * len(before) and tokens > 0
    soft = {round(A_STAR_BETA * math.log((k * math.exp(1 / A_STAR_BETA) + 4 - k) / 4), 9) for k in range(5)}
    assert {round(v, 9) for v in rates.values()} <= soft
    kept = {p.id for p in tr.train_prompts}
    assert kept == {p.id for p in before if rates[p.id] > 0} and len(kept) < len(before)  # never solved: dropped
