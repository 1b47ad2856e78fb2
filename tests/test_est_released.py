"""The authors' released Ada-Est (issue 23 baseline): its allocation rule against a transcription of the released
procedure, and the arm spec end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reinforce_ada.bench.arms import ARMS
from reinforce_ada.sampling.configure import parse_arm
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.strategies.est import remainder_allocate
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy
from reinforce_ada.types import Prompt


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
