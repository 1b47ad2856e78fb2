"""`select=iw` (issue 23, `sampling.iw`): inclusion probabilities, the fixed-size draw, Horvitz-Thompson unbiasedness,
the weights' clip and self-normalisation, their path to the loss, the fields' checks, checkpoints, planner and
simulator."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from reinforce_ada.bench.arms import ARMS
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.admission.iw import (
    ht_weights,
    inclusion_probabilities,
    iw_choose,
    proposal,
    self_normalise,
    systematic_draw,
    utilities,
)
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.memory import PassRateOracle, PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.plan import plan
from reinforce_ada.types import Prompt
from tests import test_allocators as allocators
from tests.helpers import table_of, train_config

SKEWED = np.array([0.0, 0.02, 0.9, 0.95, 0.3, 0.0, 0.1, 0.6, 0.05, 0.0, 0.8, 0.2, 0.01, 0.4, 0.0, 0.7])
"""Utilities of 16 candidates, some 0 and a few large enough that k q > 1 (the cap and its redistribution)."""


def oracle_memory(rates: dict[str, float]) -> PromptMemory:
    mem = PromptMemory(make_options(Options, estimator="oracle"))
    mem.attach(oracle=PassRateOracle(lambda ps: np.array([rates[p.id] for p in ps])))
    return mem


# -- inclusion probabilities and the draw ----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 4, 6, 15, 16])
@pytest.mark.parametrize("mix", [0.0, 0.2, 1.0])
def test_inclusion_probabilities_sum_to_k_and_are_at_most_one(k, mix):
    for u in (SKEWED, SKEWED**4, np.zeros(16), np.r_[1.0, np.zeros(15)]):
        pi = inclusion_probabilities(proposal(u, mix), k)
        assert pi.sum() == pytest.approx(k, abs=1e-9)
        assert np.all(pi >= 0) and np.all(pi <= 1.0)
        if mix > 0:
            assert np.all(pi > 0)  # the defensive share: every candidate can be drawn
    pi = inclusion_probabilities(proposal(SKEWED**4, 0.0), 6)  # heavy mass on a few: capped at 1, rest rescaled
    assert (pi == 1.0).sum() >= 2
    free = pi < 1.0
    q = proposal(SKEWED**4, 0.0)
    np.testing.assert_allclose(pi[free], q[free] * (6 - (~free).sum()) / q[free].sum())


def test_the_draw_admits_exactly_k_distinct_prompts():
    rng = np.random.default_rng(0)
    for k, mix in itertools.product((1, 3, 4, 8, 11), (0.0, 0.2)):  # mix 0: five candidates of pi = 0
        pi = inclusion_probabilities(proposal(SKEWED, mix), k)
        for _ in range(300):
            idx = systematic_draw(pi, rng)
            assert len(idx) == k and len(set(idx.tolist())) == k and np.all(np.diff(idx) > 0)
            assert np.all(pi[idx] > 0)  # a candidate of pi = 0 is never drawn
    assert systematic_draw(np.ones(16), rng).tolist() == list(range(16))


def test_empirical_inclusion_frequency_matches_pi():
    rng = np.random.default_rng(1)
    k, reps = 4, 20000
    pi = inclusion_probabilities(proposal(SKEWED, 0.2), k)
    hits = np.zeros(len(pi))
    for _ in range(reps):
        hits[systematic_draw(pi, rng)] += 1
    freq = hits / reps
    se = np.sqrt(pi * (1 - pi) / reps)
    assert np.all(np.abs(freq - pi) <= 4 * se + 1e-12), (freq, pi)


def test_horvitz_thompson_sum_is_unbiased_for_the_candidate_mean():
    """(1/k) sum over admitted x of w(x) f(x), w = k / (N pi) unclipped, estimates (1/N) sum over all x of f(x)."""
    rng = np.random.default_rng(2)
    n, k, reps = 16, 4, 20000
    f = rng.normal(size=n) + 3 * SKEWED  # any per-candidate value (a gradient coordinate)
    pi = inclusion_probabilities(proposal(SKEWED, 0.2), k)
    est = np.empty(reps)
    for r in range(reps):
        idx = systematic_draw(pi, rng)
        est[r] = (ht_weights(pi[idx], n, k, np.inf) * f[idx]).sum() / k
    want = f.mean()
    se = est.std(ddof=1) / np.sqrt(reps)
    assert abs(est.mean() - want) <= 4 * se, (est.mean(), want, se)
    naive = np.array([f[systematic_draw(pi, rng)].mean() for _ in range(2000)])  # unweighted: biased toward high u
    assert abs(naive.mean() - want) > 10 * se


# -- the weights -----------------------------------------------------------------------------------------------------
def test_equal_utilities_give_weight_one_exactly():
    cands = [Prompt(id=f"q{i}", text=f"q {i}") for i in range(16)]
    table = table_of(parse_arm("uniform:n=4,select=iw"))
    cfg = parse_arm("uniform:n=4,select=iw,candidates=4")
    chosen, w = iw_choose(
        cands, 4, PromptMemory(make_options(Options)), np.random.default_rng(0), table, cfg.options
    )  # all Beta(1, 1)
    assert len(chosen) == 4 and w == [1.0] * 4
    n = 16
    assert np.all(ht_weights(np.full(4, 4 / n), n, 4, 3.0) == 1.0)  # pi = 1 / C: w = 1 / (C pi) = 1
    rates = {p.id: 0.5 for p in cands}  # the oracle, every rate equal
    _, w = iw_choose(cands, 4, oracle_memory(rates), np.random.default_rng(0), table, cfg.options)
    assert w == [1.0] * 4


def test_utility_is_the_root_of_the_expected_signal():
    rates = {"a": 0.0, "b": 0.5, "c": 0.1, "d": 1.0}
    cands = [Prompt(id=i, text=i) for i in rates]
    u = utilities(table_of(parse_arm("uniform:n=4,select=iw")), cands, oracle_memory(rates))
    p = np.array(list(rates.values()))
    np.testing.assert_allclose(u, np.sqrt(1 - p**4 - (1 - p) ** 4), atol=1e-3)


def test_clip_and_self_normalisation():
    w = ht_weights(np.array([0.05, 0.25, 0.5, 1.0]), 16, 4, 3.0)  # raw k / (N pi) = 5, 1, 0.5, 0.25
    np.testing.assert_allclose(w, [3.0, 1.0, 0.5, 0.25])
    assert self_normalise(w).mean() == pytest.approx(1.0)
    np.testing.assert_allclose(self_normalise(w), w / w.mean())
    assert ht_weights(np.array([0.05]), 16, 4, np.inf)[0] == pytest.approx(5.0)  # 1 / lam: the mixture's own bound


def _skewed_step(spec: str, seed: int = 0):
    rates = [0.0, 0.02, 0.5, 0.98, 0.3, 1.0, 0.1, 0.6] * 8
    pool, policy = allocators.frozen(rates, seed=seed)
    s = build_strategy(parse_arm(spec).replace(seed=seed))
    s.attach(oracle=PassRateOracle(lambda ps: np.array([rates[int(p.id[1:])] for p in ps])))
    order = PromptOrder(pool, seed)
    b = collect(s, policy, order.take(8), more_prompts=lambda k: order.take(k, exclude=s.prompts))
    return s, b


def test_a_step_weights_its_groups_by_the_normalised_clipped_weights():
    spec = "uniform:n=4,select=iw,estimator=oracle,candidates=4"
    for seed in range(4):
        s, b = _skewed_step(spec, seed)
        raw = np.array([s.rule.raw[g.prompt.id] for g in b.groups])
        assert len(b.groups) == 8 and np.all(raw <= 3.0) and np.all(raw > 0)
        got = np.array([g.weight for g in b.groups])
        np.testing.assert_allclose(got, raw / raw.mean())  # uniform's own weight is 1
        m = b.ledger.extra
        assert m["unselected_prompts"] == 24 and m["offered_prompts"] == 32
        assert m["iw_weight_max"] == pytest.approx(got.max())
        assert m["iw_ess"] == pytest.approx(got.sum() ** 2 / (got**2).sum()) and 0 < m["iw_ess"] <= 8
        live = np.array([np.any(np.abs(a) > 0) for a in b.advantages])
        if live.any():  # compute_advantages rescales the live groups' weights to mean 1: the ratios are kept
            np.testing.assert_allclose(b.weights[live], got[live] / got[live].mean())
    assert len({tuple(np.round([g.weight for g in _skewed_step(spec, 0)[1].groups], 9))}) == 1  # deterministic


def test_weights_off_keeps_the_draw_and_sets_weight_one():
    spec = "uniform:n=4,select=iw,estimator=oracle,candidates=4"
    on, b_on = _skewed_step(spec, 3)
    off, b_off = _skewed_step(spec + ",iw_weights=false", 3)
    assert [g.prompt.id for g in b_on.groups] == [g.prompt.id for g in b_off.groups]
    assert [g.weight for g in b_off.groups] == [1.0] * 8 and b_off.ledger.extra["iw_ess"] == 8.0
    assert len({g.weight for g in b_on.groups}) > 1  # the skewed rates: the weights differ
    assert ARMS["iw-noweight"] == ARMS["iw-oracle"] + ",iw_weights=false"


def test_refills_and_other_samplers_compose():
    for spec in ("dynamic:n=4,select=iw,estimator=oracle,candidates=4", "seq:select=iw,estimator=oracle,candidates=4"):
        s, b = _skewed_step(spec, 1)
        w = s.rule.group_weights()
        assert np.mean(list(w.values())) == pytest.approx(1.0) and set(w) == set(s.prompts)
        for g in b.groups:
            assert g.weight == pytest.approx(w[g.prompt.id])
    s, b = _skewed_step("est:select=iw,estimator=oracle,candidates=4", 2)  # Est's residual weight times ours
    w = s.rule.group_weights()
    assert len({round(x, 9) for x in w.values()}) > 1
    for g in b.groups:
        assert g.weight == pytest.approx(w[g.prompt.id] / np.sqrt(s.p_hat[g.prompt.id] + s.cfg.options.eps))


# -- fields, checkpoints, planner, simulator -------------------------------------------------------------------------
def test_bad_fields_name_the_field_and_the_range():
    with pytest.raises(ConfigError, match=r"iw_mix=-0.1 is out of range; it must be in \[0, 1\]"):
        parse_arm("uniform:select=iw,iw_mix=-0.1")
    with pytest.raises(ConfigError, match=r"iw_mix=1.5 is out of range; it must be in \[0, 1\]"):
        strategy_config(select="iw", iw_mix=1.5)
    with pytest.raises(ConfigError, match="iw_clip=0.5 is out of range; it must be >= 1"):
        parse_arm("uniform:select=iw,iw_clip=0.5")
    with pytest.raises(ConfigError, match="iw_clip=nan must be a finite number"):
        strategy_config(select="iw", iw_clip=float("nan"))
    with pytest.raises(ConfigError, match="iw_weights"):
        strategy_config(select="iw", iw_weights="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="select='iw' contradicts name='mopps'"):
        parse_arm("mopps:select=iw")
    assert parse_arm("uniform:select=iw,iw_mix=0,iw_clip=1").options.iw_clip == 1.0


def test_a_checkpoint_after_admission_keeps_the_weights_and_old_ones_load():
    s, b = _skewed_step("uniform:n=4,select=iw,estimator=oracle,candidates=4")
    state = json.loads(json.dumps(s.state_dict()))  # after the draw, before the next step: the weights are state
    assert state["admission"]["iw_raw"]
    resumed = build_strategy(s.cfg)
    resumed.load_state_dict(state)
    assert [g.weight for g in resumed.build()] == [g.weight for g in b.groups]
    assert resumed.metrics() == s.metrics() and resumed.state_dict() == s.state_dict()
    del state["admission"]["iw_raw"]
    twin = build_strategy(s.cfg)
    twin.load_state_dict(state)
    assert twin.rule.raw == {}


def test_planner_and_simulator_accept_iw():
    from reinforce_ada.simulation.simulate import simulate

    rows = plan(parse_arm("uniform:n=4,select=iw"), [0.1, 0.5])
    assert [r.method for r in rows] == ["given_selected"] * 2
    assert rows[1].zero_signal == pytest.approx(2 * 0.5**4)
    res = simulate([ARMS["iw-oracle"], ARMS["iw"]], steps=2, seeds=1, batch_size=8, pool_size=200)
    for arm in res["arms"].values():
        run = arm["runs"][0]
        assert len(run["pass_rate"]) == 3 and run["skipped_per_step"][0] == 8 * 3  # 4 x 8 offered, 8 kept


# -- the trainer: the weight reaches the loss ------------------------------------------------------------------------
def test_trainer_rows_carry_the_iw_weight(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer

    strategy = parse_arm("uniform:n=4,select=iw,candidates=4,iw_clip=5")
    even = {"verifier": "tests.helpers:even_length"}  # a reward a random policy earns about half the time
    tr = Trainer(train_config(model_dir, tmp_path / "run", strategy, run={"steps": 1}, task=even), tensorboard=False)
    rng = np.random.default_rng(0)
    for p in tr.train_prompts:  # sharp, spread beliefs: the inclusion probabilities (and weights) differ
        tr.strategy.memory.tracker.counts[p.id] = (float(rng.uniform(0, 50)), 50.0)
    seen = {}
    rows_of = tr.rows

    def spy(batch):
        seen["batch"], seen["rows"] = batch, rows_of(batch)
        return seen["rows"]

    tr.rows = spy
    try:
        m = tr.train_step()
    finally:
        tr.close()
    batch, rows = seen["batch"], seen["rows"]
    w = tr.strategy.rule.group_weights()
    assert len(batch.groups) == 4 and len({round(x, 9) for x in w.values()}) > 1
    assert [g.weight for g in batch.groups] == pytest.approx([w[g.prompt.id] for g in batch.groups])
    live = np.array([np.any(np.abs(a) > 0) for a in batch.advantages])
    per_group = np.array([w[g.prompt.id] for g in batch.groups])
    assert live.sum() >= 2  # groups with signal: their weights' ratios are what the loss sees
    assert np.ptp(per_group[live]) > 0.05  # ... and they differ
    np.testing.assert_allclose(batch.weights[live], per_group[live] / per_group[live].mean())
    at = 0
    for g, a, wg in zip(batch.groups, batch.advantages, batch.weights, strict=True):  # the loss reads adv x weight
        for r, adv in zip(rows[at : at + len(g.samples)], a, strict=True):
            assert r.weight == pytest.approx(float(wg)) and r.adv == pytest.approx(float(adv))
        at += len(g.samples)
    assert m["unselected_prompts"] == 12 and m["iw_weight_max"] == pytest.approx(max(w.values()))
