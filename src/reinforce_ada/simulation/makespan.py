"""Simulated step time of each strategy under the round and the streaming driver (`makespan_study`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy, hard_pool
from reinforce_ada.simulation.stream import Latency, RoundEngine, SimulatedStream


def makespan_study(
    arms: dict[str, tuple[Any, dict[str, Any]]],
    *,
    prompts_per_step: int = 64,
    slots: int = 64,
    steps: int = 20,
    latency: Latency | None = None,
    pool_size: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Simulated step time of each arm under both drivers on `simulation.policy.hard_pool` (frozen policy).

    `arms` maps a name to (StrategyConfig, streaming options). Each (arm, mode) sees the same prompts per step and
    the same latency model; returns medians over steps of the makespan, samples completed, slot occupancy and the
    share of slot time spent on samples cancelled mid-decode.
    """
    prompts, rates = hard_pool(pool_size, seed=seed)
    out: dict[str, dict[str, float]] = {}
    for name, (cfg, opts) in arms.items():
        for mode in ("round", "stream"):
            policy = SimulatedPolicy(prompts, rates, SimConfig(lr=0.0, seed=seed))
            engine = SimulatedStream(policy, slots, latency, seed)
            strategy, order = build_strategy(cfg.replace(seed=seed)), PromptOrder(prompts, seed)
            rows = []
            for _ in range(steps):
                t, busy, wasted = engine.clock, engine.busy, engine.wasted
                step = order.take(prompts_per_step)
                if mode == "round":
                    led = collect(strategy, RoundEngine(engine), step, more_prompts=lambda k: []).ledger
                else:
                    led = collect_streaming(strategy, engine, step, more_prompts=lambda k: [], **opts).ledger
                span, used = engine.clock - t, engine.busy - busy + engine.wasted - wasted
                rows.append((span, led.samples_generated, used / (slots * span), (engine.wasted - wasted) / used))
            med = np.median(np.array(rows), axis=0)
            out[f"{name}/{mode}"] = dict(
                zip(("makespan", "samples", "utilisation", "wasted_share"), map(float, med), strict=True)
            )
    return out
