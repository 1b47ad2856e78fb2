"""The allocators beyond the paper: pilot_commit, knapsack, greso, mopps, seq's give_up, est's predictor.

Closed forms where the maths gives one; statistical checks on the frozen simulated policy with 4-standard-error
bounds (as tests/test_streaming.py); both drivers; mid-step checkpoints; bad configuration named.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from collections import Counter
from math import comb

import numpy as np
import pytest

from reinforce_ada.bench.arms import ARMS
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission import Greso, RuleContext, mopps_choose
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PromptMemory, resolved_evict
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy, knapsack_allocate, knapsack_budget
from reinforce_ada.sampling.strategies.est import knapsack_value, remainder_allocate
from reinforce_ada.sampling.strategies.seq import resolve_chance
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.plan import greso_skip_share, plan, plan_monte_carlo
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt, Sample

REPS = 1000
SPECS = [
    "pilot_commit",
    "knapsack",
    "greso",
    "mopps",
    "seq:give_up=0.1",
    "est:estimator=predictor",
    "est:allocation=knapsack,estimator=both",
    "seq:select=greso",
    "est:select=mopps",
    "seq:evict=1.0",
    "uniform:n=4,select=iw,estimator=both",
    "dynamic:n=4,select=iw",
]


def frozen(rates: list[float], seed: int = 0, prefix: str = "p") -> tuple[list[Prompt], SimulatedPolicy]:
    prompts = [Prompt(id=f"{prefix}{i}", text=f"prompt {i}", level=i % 3) for i in range(len(rates))]
    return prompts, SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=seed))


def assert_within(x: float, exact: float, se: float, what: str) -> None:
    assert abs(x - exact) <= 4 * se + 1e-12, f"{what}: {x:.4f} vs {exact:.4f} (4 se = {4 * se:.4f})"


def both_drivers(spec: str, rates: list[float], seed: int = 0, strategies: list | None = None):
    """One step of `spec` on the same frozen prompts under the round and the streaming driver."""
    cfg = parse_arm(spec).replace(seed=seed)
    out = []
    for mode in ("round", "stream"):
        prompts, policy = frozen(rates, seed + (mode == "stream") * 100)
        s = build_strategy(cfg)
        if mode == "round":
            out.append(collect(s, policy, prompts))
        else:
            out.append(collect_streaming(s, policy.streaming(32, seed=seed), prompts))
        if strategies is not None:
            strategies.append(s)
    return out


# -- configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS + ["dynamic:select=greso", "uniform:select=mopps", "knapsack:min_samples=2"])
def test_every_arm_spec_parses(spec):
    cfg = parse_arm(spec)
    assert parse_arm(spec) == cfg and cfg.name == spec.partition(":")[0]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"estimator": "net"}, "estimator"),
        ({"select": "topk"}, "select"),
        ({"name": "greso", "select": "mopps"}, "select"),
        ({"give_up": 1.0}, "give_up"),
        ({"pilot": 40}, "pilot"),
        ({"pilot": 0}, "pilot"),
        ({"commit_lo": 0.8, "commit_hi": 0.5}, "commit_lo"),
        ({"commit_hi": 1.5}, "commit_hi"),
        ({"evict": 0.0}, "evict"),
        ({"zero_variance_target": -0.1}, "zero_variance_target"),
        ({"target": 2.0}, "target"),
        ({"candidates": 0}, "candidates"),
        ({"history": 1}, "history"),
        ({"predictor_lr": 0.0}, "predictor_lr"),
        ({"predictor_dim": -1}, "predictor_dim"),
    ],
)
def test_bad_allocator_config_names_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        strategy_config(**changes)


def test_resolved_defaults():
    assert resolved_evict(strategy_config(name="pilot_commit").options) == 1.0
    assert resolved_evict(strategy_config(name="pilot_commit", evict=1.5).options) is None
    seq = strategy_config(name="seq").options
    assert resolved_evict(seq) is None and seq.select == "none"
    assert strategy_config(name="greso").options.select == "greso"
    assert strategy_config(name="mopps").options.select == "mopps"
    for name in ("pilot_commit", "knapsack", "greso", "mopps"):  # their papers' GRPO baseline, std on
        o = strategy_config(name=name).options
        assert o.advantage == "group" and o.scale_std
    with pytest.raises(ConfigError, match="predictor"):
        build_strategy(strategy_config(name="seq"), predictor=lambda p: 0.5)


def test_cli_help_and_simulate_know_the_new_strategies(tmp_path, capsys):
    from reinforce_ada.cli import main

    for cmd in ("plan", "simulate"):  # each strategy's --help lists its own options and the shared ones
        for name, flag in (("seq", "--give-up"), ("pilot_commit", "--commit-lo")):
            with pytest.raises(SystemExit) as e:
                main([cmd, "--strategy", name, "--help"])
            assert e.value.code == 0
            text = capsys.readouterr().out
            new = (flag, "--select", "--estimator")
            assert all(f in text for f in new)  # plan lists only the options that change its answer
            assert "--candidates" not in text  # a ranking rule's option: listed only while select names one
        if cmd == "simulate":
            with pytest.raises(SystemExit):
                main([cmd, "--strategy", "seq", "--select", "mopps", "--help"])
            assert "--candidates" in capsys.readouterr().out
    specs = "uniform;seq;pilot_commit;knapsack;seq:select=greso;est:estimator=predictor"
    argv = ["simulate", "--strategies", specs, "--steps", "3", "--seeds", "1", "--batch-size", "8"]
    assert main([*argv, "--pool-size", "60", "--out", str(tmp_path / "s")]) == 0
    res = json.loads((tmp_path / "s.json").read_text())
    assert len(res["arms"]) == 6 and "est:estimator=predictor" in capsys.readouterr().out
    # `simulate --strategy X` simulates X (beside GRPO), with the options given as flags
    small = ["--steps", "2", "--seeds", "1", "--batch-size", "8", "--pool-size", "60"]
    assert main(["simulate", "--strategy", "spo", "--select", "none", *small, "--out", str(tmp_path / "x")]) == 0
    capsys.readouterr()
    arms = json.loads((tmp_path / "x.json").read_text())["arms"]
    assert list(arms) == ["uniform", "spo:select=none"] and arms["spo:select=none"]["config"]["name"] == "spo"
    assert arms["uniform"]["config"]["advantage"] == "group" and arms["uniform"]["config"]["n"] == 4  # plain GRPO
    argv = ["simulate", "--strategy", "seq", "--n", "1", "--advantage", "tracker", *small, "--out", str(tmp_path / "y")]
    assert main(argv) == 0  # X's flags are X's: GRPO beside it keeps its own n and baseline
    arms = json.loads((tmp_path / "y.json").read_text())["arms"]
    assert (arms["uniform"]["config"]["n"], arms["uniform"]["config"]["advantage"]) == (4, "group")
    seq = arms[list(arms)[1]]["config"]
    assert (seq["name"], seq["n"], seq["advantage"]) == ("seq", 1, "tracker")
    capsys.readouterr()
    assert main(["plan", "--strategy", "pilot_commit", "--pass-rates", "0.1,0.5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["closed_form"] * 2 and rows[0]["evicted"] == pytest.approx(1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the planner's own runs ask for no prompts they were not given
        assert main(["plan", "--strategy", "dynamic", "--pass-rates", "0.5", "--monte-carlo", "20", "--json"]) == 0
    capsys.readouterr()
    assert main(["plan", "--strategy", "greso", "--pass-rates", "0.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["skipped"] == pytest.approx(0.99)


# -- knapsack -------------------------------------------------------------------------------------------------------
def brute_force(p: list[float], budget: int, lo: int, hi: int) -> float:
    best = -1.0
    for n in itertools.product(range(lo, hi + 1), repeat=len(p)):
        if sum(n) == budget:
            best = max(best, float(knapsack_value(np.array(p), np.array(n)).sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_knapsack_allocation_is_optimal(seed):
    rng = np.random.default_rng(seed)
    p = list(rng.choice([0.0, 0.02, 0.1, 0.3, 0.5, 0.8, 1.0], size=4))
    lo, hi = 2, 9
    budget = int(rng.integers(4 * lo, 4 * hi + 1))
    n = knapsack_allocate(np.array(p), budget, lo, hi)
    assert n.sum() == budget and n.min() >= lo and n.max() <= hi
    assert float(knapsack_value(np.array(p), n).sum()) == pytest.approx(brute_force(p, budget, lo, hi), abs=1e-12)


def test_knapsack_paper_rule():
    # None: no history -> the default 8; 0 and 1 -> min; fallback: the excess goes to the p = 0 prompt
    n = knapsack_budget([None, 0.0, 1.0, 0.5, 0.5], 5 * 8, 2, 32)
    assert n[0] == 8 and n[2] == 2 and n.sum() == 40
    need = 2 * int(np.log(0.1) / np.log(0.5))  # the paper's cost of the two uncertain prompts: 3 each
    assert n[3] + n[4] == 2 * 2 + need and n[1] == 40 - 8 - 2 - (2 * 2 + need)
    assert list(knapsack_budget([0.1] * 4, 400, 2, 32)) == [32] * 4  # caps hold; the rest is left unspent
    assert knapsack_budget([], 10, 2, 4).size == 0


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["knapsack:budget=24", "est:allocation=knapsack,budget=24,min_samples=2"])
def test_knapsack_plan_matches_monte_carlo(spec):
    cfg, rates = parse_arm(spec), [0.0, 0.05, 0.3, 0.9]
    exact = plan(cfg, rates)
    assert sum(r.expected_samples for r in exact) == 24
    mc = plan_monte_carlo(cfg, rates, reps=1500, seed=3)
    for e, m in zip(exact, mc, strict=True):
        assert m.expected_samples == e.expected_samples
        assert_within(m.zero_signal, e.zero_signal, max(m.stderr, 1e-3), f"zero signal at p={e.p}")


def test_knapsack_learns_from_its_reward_memory():
    prompts, policy = frozen([0.0, 0.5, 1.0, 0.2] * 4)
    s = build_strategy(strategy_config(name="knapsack", min_samples=2))
    first = collect(s, policy, prompts).ledger
    assert first.extra["prompts_without_history"] == 16 and first.samples_generated == 8 * 16
    collect(s, policy, prompts)
    alloc = s.alloc
    assert alloc["p2"] == 2 and alloc["p1"] > 2 and sum(alloc.values()) == 8 * 16  # always right: 2 (the floor)
    assert alloc["p0"] > 2  # the paper's fallback: the budget the uncertain prompts do not need goes to p_hat = 0


# -- pilot-commit ---------------------------------------------------------------------------------------------------
def test_pilot_commit_closed_form():
    cfg = strategy_config(name="pilot_commit")
    for row in plan(cfg, [0.0, 0.05, 0.2, 0.5, 0.9, 1.0]):
        band = sum(comb(8, x) * row.p**x * (1 - row.p) ** (8 - x) for x in range(1, 7))  # 1/8 <= x/8 <= 6/8
        assert row.expected_samples == pytest.approx(8 + 24 * band)
        assert row.evicted == pytest.approx(row.p**8)
        assert row.zero_signal == pytest.approx(1 - band)  # a committed pool has both outcomes by construction


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.05, 0.3, 0.8])
def test_pilot_commit_both_drivers_match_plan(p):
    exact = plan(strategy_config(name="pilot_commit"), [p])[0]
    for batch in both_drivers("pilot_commit", [p] * REPS, seed=1):
        led = batch.ledger
        sizes = np.array([len(g.pool_rewards) for g in batch.groups] + [8] * (REPS - len(batch.groups)))
        assert_within(led.samples_generated / REPS, exact.expected_samples, sizes.std() / np.sqrt(REPS), "samples")
        z = led.no_signal_prompt_share
        assert_within(z, exact.zero_signal, np.sqrt(max(z * (1 - z), 1e-3) / REPS), "no signal")
        m = led.extra
        assert m["committed_prompts"] + m["deferred_prompts"] + m["too_easy_prompts"] == led.prompts == REPS
        assert m["pilot_samples"] == 8 * REPS and all(len(g.samples) == 32 for g in batch.groups)


def test_pilot_commit_fills_its_batch_exactly_and_evicts():
    rates = [0.0, 1.0, 0.4, 0.0, 0.5, 1.0, 0.3, 0.0] * 30
    prompts, policy = frozen(rates, seed=2)
    order = PromptOrder(prompts, 0)
    s = build_strategy(strategy_config(name="pilot_commit", max_gen_batches=10))
    skipped = 0
    for _ in range(12):
        before = set(s.memory.evicted)
        b = collect(s, policy, order.take(16), more_prompts=lambda k: order.take(k, exclude=s.prompts))
        led = b.ledger
        assert len(b.groups) == led.extra["committed_prompts"] == 16 and led.extra["batch_filled"]
        assert led.prompts - led.extra["deferred_prompts"] - led.extra["too_easy_prompts"] == 16  # no overflow
        assert not before & set(s.prompts)  # an evicted prompt is never sampled again
        skipped += led.extra["skipped_evicted"]
    assert skipped > 0 and all(s.memory.streak[pid] > 0 for pid in s.memory.evicted)  # evicted after all-correct
    assert {pid for pid in s.memory.visits if rates[int(pid[1:])] == 1.0} <= s.memory.evicted


# -- seq's give-up rule ---------------------------------------------------------------------------------------------
def test_resolve_chance_closed_form():
    # under Beta(1, 1) the Beta-binomial is uniform on 0..r: P(X >= need) = (r - need + 1) / (r + 1)
    for r, need in [(24, 2), (8, 1), (16, 5), (3, 4)]:
        expect = max(0, r - need + 1) / (r + 1)
        assert resolve_chance(0, 0, r, 1.0, 1.0, k_pos=need, k_neg=0) == pytest.approx(expect)
    # a degenerate belief at p reduces to the binomial tail
    p, r = 0.2, 10
    tail = sum(comb(r, j) * p**j * (1 - p) ** (r - j) for j in range(2, r - 1))
    assert resolve_chance(0, 0, r, p * 1e6, (1 - p) * 1e6, k_pos=2, k_neg=2) == pytest.approx(tail, rel=1e-4)


def test_give_up_off_is_the_paper():
    rates = [0.0, 0.03, 0.1, 0.5]
    assert plan(strategy_config(), rates) == plan(strategy_config(give_up=0.0), rates)
    a, b = plan(strategy_config(give_up=0.1), rates), plan(strategy_config(), rates)
    assert a[0].expected_samples == 24 < b[0].expected_samples == 32  # 0/24 wrong: two positives in 8 are < 10%
    assert a[3].expected_samples == pytest.approx(b[3].expected_samples, rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.02, 0.1])
def test_give_up_both_drivers_match_plan(p):
    exact = plan(parse_arm("seq:give_up=0.1"), [p])[0]
    for batch in both_drivers("seq:give_up=0.1", [p] * REPS, seed=4):
        sizes = np.array([len(g.pool_rewards) for g in batch.groups])
        assert_within(sizes.mean(), exact.expected_samples, sizes.std() / np.sqrt(REPS), "pool size")
        u = batch.ledger.unresolved_prompts / REPS
        assert_within(u, exact.unresolved, np.sqrt(u * (1 - u) / REPS), "unresolved")
        assert batch.ledger.extra["given_up_prompts"] <= batch.ledger.unresolved_prompts


# -- GRESO ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.02, 0.2, 0.9])
def test_greso_skip_share_matches_the_real_rule(p):
    """The planner's stationary chain against the real `Greso.keep` + memory over many offers (fixed p_easy/hard)."""
    n, offers = 4, 6000
    rng, draw = np.random.default_rng(0), np.random.default_rng(1)
    mem, skipped = PromptMemory(make_options(Options)), 0
    g = greso_rule(mem, rng)
    prompt = Prompt(id="x", text="")
    for _ in range(offers):
        if g.keep(prompt):
            mem.record(prompt, list(draw.random(n) < p))
        else:
            skipped += 1
    exact = greso_skip_share(p**n, (1 - p) ** n)
    # offers are correlated through the streak: allow 4 se of a chain with ~20x the iid variance
    assert_within(skipped / offers, exact, np.sqrt(20 * exact * (1 - exact) / offers) + 1e-3, "skip share")
    assert plan(strategy_config(name="greso"), [p])[0].skipped == pytest.approx(exact)


def greso_rule(memory: PromptMemory, rng: np.random.Generator) -> Greso:
    """The GRESO admission rule at its default target (0.25), on this memory and generator."""
    return Greso(strategy_config(name="greso").options, RuleContext(memory, rng, law=lambda: None))


def test_greso_adapts_toward_the_target():
    g = greso_rule(PromptMemory(make_options(Options)), np.random.default_rng(0))
    g.adapt({"visits": 10, "all_correct": 5, "all_wrong": 5})
    assert (g.p_easy, g.p_hard) == (0.5, 0.5)  # inactive until a prompt with history is offered
    g.active = True
    for _ in range(100):
        g.adapt({"visits": 10, "all_correct": 0, "all_wrong": 9})
    assert g.p_hard == Greso.LO and g.p_easy == Greso.HI


def test_greso_skips_zero_variance_prompts_and_refills():
    rates = [0.0] * 40 + [0.5] * 40
    prompts, policy = frozen(rates, seed=3)
    order = PromptOrder(prompts, 0)
    s = build_strategy(parse_arm("uniform:select=greso,seed=1"))
    skipped = []
    for _ in range(8):
        b = collect(s, policy, order.take(16), more_prompts=lambda k: order.take(k, exclude=s.prompts))
        assert b.ledger.prompts == 16  # every skipped prompt was replaced
        m = b.ledger.extra
        assert m["offered_prompts"] == 16 + m["skipped_prompts"] == 16 + m["skipped_greso"]
        skipped.append(m["skipped_greso"])
    assert skipped[0] == 0 and sum(skipped[4:]) > 10  # after an epoch the all-wrong prompts are skipped


def test_greso_decisions_identical_under_both_drivers():
    """With p in {0, 1} every outcome is certain, so both drivers must admit exactly the same prompts."""
    rates = [0.0, 1.0, 0.0, 0.0, 1.0] * 10
    admitted = []
    for mode in ("round", "stream"):
        prompts, policy = frozen(rates, seed=5)
        order = PromptOrder(prompts, 0)
        s = build_strategy(parse_arm("greso:n=4,seed=2"))
        ids = []
        for _ in range(10):
            step, more = order.take(10), (lambda k, s=s, order=order: order.take(k, exclude=s.prompts))
            if mode == "round":
                collect(s, policy, step, more_prompts=more)
            else:
                collect_streaming(s, policy.streaming(8, seed=1), step, more_prompts=more)
            ids.append(sorted(s.prompts))
        admitted.append(ids)
    assert admitted[0] == admitted[1]


# -- MoPPS ----------------------------------------------------------------------------------------------------------
def test_mopps_choose_prefers_the_target():
    mem = PromptMemory(make_options(Options))
    cands = [Prompt(id=str(i), text="") for i in range(6)]
    for p, k in zip(cands, [0, 2, 5, 8, 10, 3], strict=True):
        mem.tracker.counts[p.id] = (k * 100.0, 1000.0)  # sharp beliefs at 0, .2, .5, .8, 1, .3
    chosen = mopps_choose(cands, 2, mem, np.random.default_rng(0), target=0.5)
    assert [p.id for p in chosen] == ["2", "5"]
    assert mopps_choose(cands[:2], 3, mem, np.random.default_rng(0), target=0.5) == cands[:2]


def test_mopps_selects_near_target_prompts_over_steps():
    rates = [0.0] * 30 + [0.5] * 30 + [1.0] * 30
    prompts, policy = frozen(rates, seed=6)
    order = PromptOrder(prompts, 0)
    s = build_strategy(parse_arm("mopps:candidates=4,seed=3"))
    picked: Counter = Counter()
    for step in range(30):
        b = collect(s, policy, order.take(8), more_prompts=lambda k: order.take(k, exclude=s.prompts))
        assert b.ledger.prompts == 8 and b.ledger.extra["offered_prompts"] == 32
        assert b.ledger.extra["unselected_prompts"] == 24
        if step >= 10:
            picked.update("mid" if rates[int(g.prompt.id[1:])] == 0.5 else "edge" for g in b.groups)
    # a third of the pool is at the target; measured: about two thirds of the choices after 10 steps
    assert picked["mid"] / (picked["mid"] + picked["edge"]) > 0.5


# -- every new strategy: drivers, checkpoints, metrics --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS)
def test_both_drivers_draw_the_same_law(spec):
    rates = [0.03, 0.15, 0.5, 0.9] * 300
    strategies: list = []
    rnd, st = both_drivers(spec, rates, seed=7, strategies=strategies)
    n = len(rates)
    drawn = np.array([len(pool) for pool in strategies[0].pools.values()])
    a, b = rnd.ledger.samples_generated / n, st.ledger.samples_generated / n
    assert_within(b, a, np.sqrt(2 * max(drawn.var(), 0.25) / n), "samples per prompt")
    a, b = rnd.ledger.prompts_trained / n, st.ledger.prompts_trained / n
    assert_within(b, a, np.sqrt(2 * max(a * (1 - a), 1e-3) / n), "prompts trained")
    za, zb = rnd.ledger.no_signal_prompt_share, st.ledger.no_signal_prompt_share
    assert_within(zb, za, np.sqrt(2 * max(za * (1 - za), 1e-3) / n), "no-signal share")


def driver_sample(engine, sent: Counter):
    def sample(requests):
        out = engine.generate(requests)
        for s in out:
            s.index += sent[s.prompt_id]
        sent.update({r.prompt.id: r.k for r in requests})
        return out

    return sample


@pytest.mark.parametrize("spec", SPECS)
def test_state_round_trip_mid_step_with_history(spec):
    rates = [0.0, 1.0, 0.3, 0.6, 0.05, 0.9, 0.5, 0.0]
    prompts, engine = frozen(rates * 3, seed=3)
    source = PromptOrder(prompts, 1)
    cfg = parse_arm(spec).replace(seed=5)
    a = build_strategy(cfg)
    for _ in range(3):  # history: evictions, streaks, predictor, posteriors
        collect(a, engine, source.take(6), more_prompts=lambda k: source.take(k, exclude=a.prompts))
    sent: Counter = Counter()
    sample = driver_sample(engine, sent)
    a.begin(source.take(6))
    b = None
    rounds = 0
    while not a.done():
        if a.wanted_prompts():
            more = source.take(a.wanted_prompts(), exclude=a.prompts)
            if rounds == 0 and b is None:  # checkpoint in the middle of collecting candidates
                b = build_strategy(cfg)
                b.load_state_dict(json.loads(json.dumps(a.state_dict())))
                assert b.state_dict() == a.state_dict()
            a.add_prompts(more)
            if b is not None:
                b.add_prompts(more)
            continue
        if b is None:  # checkpoint before the first requests of the step
            b = build_strategy(cfg)
            b.load_state_dict(json.loads(json.dumps(a.state_dict())))
            assert b.state_dict() == a.state_dict()
        requests = a.propose()
        assert b.propose() == requests
        s = sample(requests)
        b.observe([Sample(**vars(x)) for x in s])
        a.observe(s)
        rounds += 1
    assert b is not None and b.done()
    ga, gb = a.build(), b.build()
    assert [(g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in ga] == [
        (g.prompt.id, g.rewards, g.pool_rewards, g.weight) for g in gb
    ]
    assert json.dumps(a.metrics()) == json.dumps(b.metrics()) and a.memory.state_dict() == b.memory.state_dict()


def test_ledger_reports_each_allocators_counts():
    rates = [0.0, 1.0, 0.3, 0.6] * 10
    keys = {
        "pilot_commit": {"committed_prompts", "deferred_prompts", "too_easy_prompts", "skipped_evicted"},
        "greso": {"offered_prompts", "skipped_prompts", "skipped_greso", "greso_p_easy", "greso_p_hard"},
        "mopps": {"offered_prompts", "skipped_prompts", "unselected_prompts"},
        "seq:give_up=0.2": {"given_up_prompts", "given_up_samples"},
        "knapsack": {"budget_used", "prompts_without_history"},
    }
    for spec, want in keys.items():
        prompts, policy = frozen(rates)
        m = collect(build_strategy(parse_arm(spec)), policy, prompts).ledger.as_metrics()
        assert want <= set(m), f"{spec}: missing {want - set(m)}"
        assert m["samples_generated"] > 0


def test_predictor_changes_est_cold_start_allocation():
    """After a step on other prompts of the same levels, a never-seen prompt is no longer allocated as p = 0.5."""
    rates = [0.02] * 40 + [0.6] * 40
    prompts = [Prompt(id=f"q{i}", text="", level=int(r > 0.1)) for i, r in enumerate(rates)]
    policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=8))
    tracker, pred = (build_strategy(strategy_config(name="est", estimator=e)) for e in ("tracker", "predictor"))
    for s in (tracker, pred):
        collect(s, policy, prompts[::2])
        collect(s, policy, prompts[1:8:2] + prompts[41:48:2])  # fresh prompts of both levels
    assert len(set(tracker.alloc.values())) == 1  # all at the Beta(1, 1) prior: the same N
    hard, easy = pred.alloc["q1"], pred.alloc["q41"]
    assert pred.p_hat["q1"] < 0.25 < 0.4 < pred.p_hat["q41"] and hard > easy  # inv_sqrt: more on the hard level


def test_simulated_prompt_features_and_empty_steps():
    from reinforce_ada.simulation.simulate import simulate

    res = simulate(["est:estimator=both"], steps=2, seeds=1, batch_size=8, pool_size=40, features="probe")
    assert res["settings"]["features"] == "probe" and len(res["arms"]["est:estimator=both"]["runs"]) == 1
    with pytest.raises(ConfigError, match="features"):
        simulate(["uniform"], steps=1, seeds=1, batch_size=4, pool_size=10, features="hidden")
    prompts, policy = frozen([0.5, 0.0])
    assert policy.prompt_features("p0") == policy.phi[0].tolist()
    for spec in ("greso", "mopps", "pilot_commit"):  # TRL drops a step's pools with begin([])
        s = build_strategy(parse_arm(spec))
        collect(s, policy, prompts)
        step = s.memory.step
        s.begin([])
        assert s.done() and s.propose() == [] and s.build() == [] and s.memory.step == step


# --- (was tests/test_est_released.py) ---------------------------------------------------------------------------------
# The authors' released Ada-Est (issue 23 baseline): its allocation rule against a transcription of the released
# procedure, and the arm spec end to end.


def released(p_hat, per_prompt):
    """The released procedure as its docstring states it: 1 each, the rest by 1/p_hat, floors, largest remainders."""
    b = len(p_hat)
    total, rest = per_prompt * b, per_prompt * b - b
    w = [1 / max(p, 1e-6) for p in p_hat]
    floats = [rest * x / sum(w) for x in w]
    n = [1 + math.floor(f) for f in floats]
    order = sorted(range(b), key=lambda i: -(floats[i] - math.floor(floats[i])))  # stable: ties by index
    for i in order[: total - sum(n)]:
        n[i] += 1
    return n


@pytest.mark.parametrize("seed", range(20))
def test_matches_the_released_procedure_without_a_cap(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.9, int(rng.integers(2, 12)))
    got = remainder_allocate(1 / p, 8 * len(p), 1, 10**6)
    assert got.tolist() == released(p.tolist(), 8)


def test_a_cap_holds_and_the_budget_is_still_spent():
    n = remainder_allocate(np.array([100.0, 1.0, 1.0]), 24, 1, 10)
    assert n.tolist()[0] == 10 and n.sum() == 24 and n.max() <= 10


def test_the_arm_runs_and_trains_every_sample_without_a_residual_weight():
    cfg = parse_arm(ARMS["est-released"])
    prompts = [Prompt(id=f"e{i}", text="") for i in range(8)]
    policy = SimulatedPolicy(prompts, [0.1, 0.5] * 4, SimConfig(lr=0.0, seed=0))
    batch = collect(build_strategy(cfg), policy, prompts)
    assert batch.ledger.samples_generated == 8 * 8  # the default budget: 8 per prompt
    assert all(g.weight == 1.0 for g in batch.groups)
    assert sum(len(g.samples) for g in batch.groups) == 64


# --- (was tests/test_knapsack_reference.py) ---------------------------------------------------------------------------
# Knapsack RL's released code vs its paper: both allocations and both pass-rate estimates, each against a brute
# force of its own definition (issue 21, item 6).


def brute(p, budget, lo, hi, value):
    """Exhaustive search over allocations summing to the budget (the DP's feasible set)."""
    best = -1.0
    for n in itertools.product(range(lo, hi + 1), repeat=len(p)):
        if sum(n) != budget:
            continue
        if value == "total":
            v = sum(knapsack_value(pi, ni) for pi, ni in zip(p, n, strict=True))
        else:  # the released DP: nothing beyond lo scores 0, k more score value(p, lo + k)
            v = sum(knapsack_value(pi, ni) if ni > lo else 0.0 for pi, ni in zip(p, n, strict=True))
        best = max(best, v)
    return best


def score(p, n, lo, value):
    if value == "total":
        return sum(knapsack_value(pi, ni) for pi, ni in zip(p, n, strict=True))
    return sum(knapsack_value(pi, ni) if ni > lo else 0.0 for pi, ni in zip(p, n, strict=True))


@pytest.mark.parametrize("value", ["total", "reference"])
def test_greedy_reaches_the_brute_force_optimum_of_each_objective(value):
    rng = np.random.default_rng(0)
    for _ in range(60):
        b = int(rng.integers(2, 4))
        p = rng.uniform(0.02, 0.98, b).round(2)
        lo, hi = 2, int(rng.integers(3, 7))
        budget = int(rng.integers(lo * b, hi * b + 1))
        n = knapsack_allocate(p, budget, lo, hi, value)
        assert n.sum() == budget and (n >= lo).all() and (n <= hi).all()
        assert score(p, n, lo, value) == pytest.approx(brute(p, budget, lo, hi, value), abs=1e-12)


def test_the_two_objectives_allocate_differently_on_some_cases():
    rng = np.random.default_rng(1)
    differ = 0
    for _ in range(200):
        p = rng.uniform(0.02, 0.98, 3).round(2)
        a = knapsack_allocate(p, 12, 2, 6, "total")
        b = knapsack_allocate(p, 12, 2, 6, "reference")
        differ += int((a != b).any())
    assert 0 < differ < 200


def test_last_visit_estimate_uses_the_whole_latest_visit():
    mem = PromptMemory(make_options(Options, history=16))
    x = Prompt(id="x", text="")
    mem.record(x, [True] * 16 + [False] * 16)  # a 16-of-32 visit, the correct ones first
    assert mem.recent_rate("x") == 0.0  # the paper's "last 16 rewards"
    assert mem.recent_rate("x", rule="last_visit") == 0.5
    mem.record(x, [True] * 4)  # a small visit: both fall back to the last 16 outcomes
    assert mem.recent_rate("x", rule="last_visit") == mem.recent_rate("x") == 4 / 16
    twin = PromptMemory(make_options(Options, history=16))
    twin.load_state_dict(mem.state_dict())
    assert twin.last_visit == mem.last_visit


def test_options_reach_the_strategy_and_bad_values_name_the_field():
    s = build_strategy(strategy_config(name="knapsack", knapsack_value="reference", knapsack_estimate="last_visit"))
    assert s.cfg.options.knapsack_value == "reference"
    with pytest.raises(ConfigError, match="knapsack_value"):
        strategy_config(knapsack_value="dp")
    with pytest.raises(ConfigError, match="knapsack_estimate"):
        strategy_config(knapsack_estimate="ema")
