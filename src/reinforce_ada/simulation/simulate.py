"""Run strategies end to end on the simulated policy and write learning curves (JSON + PNG).

Every arm sees the same pool, the same per-seed prompt order and the same simulated-policy initialisation; only the
strategy differs. Curves report the true mean pass rate over the whole pool (no eval noise), cumulative samples,
samples per step and the share of a step's prompts that give no gradient.
What a learned difficulty predictor (`estimator=predictor|both`) can see is set by `features`: `none` -- the
prompt's text and level (the pool's difficulty bucket, as a real task's level); `policy` -- also the policy's own
prompt features phi_x in `Prompt.meta["features"]` (the analogue of the policy's prompt hidden state); `probe` --
phi_x plus a reading of the prompt's initial logit with unit Gaussian noise (a hidden state that also encodes
difficulty: an assumption, not a measurement). `estimator=oracle` reads the policy's true current pass rates
(`SimulatedPolicy.oracle`), free of budget: the oracle arms' ceiling.

What it is for, and what it is not. It is for the mechanics and the statistics: the planner's closed forms and
Monte-Carlo cross-checks, the strategies' bookkeeping end to end (retirement, budgets, refills, admission, state),
and the statistical tests. It is NOT a predictor of which allocator wins on your model and data: fed each pool's
exact per-prompt pass rates, it ranked the arms no better than counting their samples per step, named the wrong
best uniform n on two pools of four, and got the sign of the room for prompt selection wrong on two pools (its
normalised optimizer makes a step with 8 samples per prompt move no further than one with 2). To choose a strategy,
train: `reinforce-ada compare` on a pool of your own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import arm_label, parse_arm, strategy_config
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.simulation.policy import SimConfig, SimulatedPolicy, hard_pool
from reinforce_ada.types import Prompt

NOT_A_PREDICTOR = (
    "simulate runs the strategies' mechanics on a simulated policy; it does not predict which strategy wins on your "
    "model and data (fed exact pass rates it ranked arms no better than samples per step), so choose one with "
    "`reinforce-ada compare` (real training)"
)
"""The one line `simulate` prints and its `--help` shows (module docstring: what the simulator is for)."""
SIM_BYTES_PER_PROMPT = 1024
"""Memory one pool prompt takes in a run (its `Prompt`, pass rate, features and order; about 0.55 KB measured)."""
SIM_BYTES_PER_STEP = 2048
"""Memory one step of one arm and seed takes in the results (five curve numbers, the medians, the JSON text and its
bytes; about 1 KB measured). The command line refuses --pool-size, --steps and --seeds past usable memory with
these two."""


def run_arm(
    cfg: StrategyConfig,
    prompts: Sequence[Prompt],
    rates: np.ndarray,
    *,
    steps: int,
    batch_size: int,
    seed: int,
    sim: SimConfig,
    features: str = "none",
) -> dict[str, list[float]]:
    engine = SimulatedPolicy(prompts, rates, SimConfig(**{**asdict(sim), "seed": seed}))
    prompts = with_features(prompts, rates, engine, features, seed)
    strategy = build_strategy(cfg.replace(seed=seed))
    oracle = engine.oracle()  # estimator=oracle reads the simulated policy's true current pass rates
    strategy.attach(oracle=oracle, scorer=engine.scorer())  # forgetting="drift": the simulated policy scores
    stream = PromptOrder(prompts, seed)

    keys = ("pass_rate", "samples", "zero_signal", "samples_per_step", "skipped_per_step")
    curve: dict[str, list[float]] = {k: [] for k in keys}
    total = 0
    curve["pass_rate"].append(float(engine.pass_rates().mean()))
    curve["samples"].append(0.0)
    for _ in range(steps):
        batch = collect(
            strategy, engine, stream.take(batch_size), more_prompts=lambda k: stream.take(k, exclude=strategy.prompts)
        )
        engine.update(batch.groups, batch.advantages, batch.weights)
        oracle.invalidate()
        total += batch.ledger.samples_generated
        curve["pass_rate"].append(float(engine.pass_rates().mean()))
        curve["samples"].append(float(total))
        curve["zero_signal"].append(batch.ledger.no_signal_prompt_share)
        curve["samples_per_step"].append(float(batch.ledger.samples_generated))
        curve["skipped_per_step"].append(float(batch.ledger.extra.get("skipped_prompts", 0)))
    return curve


FEATURES = ("none", "policy", "probe")


def with_features(
    prompts: Sequence[Prompt], rates: np.ndarray, engine: SimulatedPolicy, features: str, seed: int
) -> list[Prompt]:
    """The prompts with `meta["features"]` as `features` says (module docstring)."""
    if features not in FEATURES:
        raise ConfigError(f"features={features!r} is not valid; choose one of {list(FEATURES)}")
    if features == "none":
        return list(prompts)
    rng = np.random.default_rng([seed, 29])
    out = []
    for p, rate in zip(prompts, rates, strict=True):
        x = engine.prompt_features(p.id)
        if features == "probe":
            r = float(np.clip(rate, 1e-6, 1 - 1e-6))
            x = [*x, float(np.log(r / (1 - r)) + rng.normal())]
        out.append(replace(p, meta={**p.meta, "features": x}))
    return out


def simulate(
    arms: Sequence[str],
    *,
    steps: int = 100,
    seeds: int = 3,
    batch_size: int = 64,
    pool_size: int = 2000,
    base: StrategyConfig | None = None,
    sim: SimConfig | None = None,
    pool_seed: int = 0,
    features: str = "none",
    progress: bool = False,
) -> dict[str, Any]:
    """Every arm for `seeds` seeds on one simulated hard pool; `progress` shows a bar over the arm x seed runs (with
    an ETA: a run is milliseconds per step, but 5 arms x 5 seeds x 200 steps is minutes on 2 cores)."""
    base = base or strategy_config()
    sim = sim or SimConfig()
    if not arms:
        raise ConfigError("no arms to simulate: give at least one strategy, e.g. 'uniform,seq'")
    for name, value in (("steps", steps), ("seeds", seeds), ("batch_size", batch_size), ("pool_size", pool_size)):
        if value < 1:
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if batch_size > pool_size:
        raise ConfigError(
            f"batch_size={batch_size} is larger than pool_size={pool_size}: a step cannot draw more "
            "distinct prompts than the pool holds"
        )
    prompts, rates = hard_pool(pool_size, pool_seed)
    results: dict[str, Any] = {
        "pool": {
            "size": pool_size,
            "mean_pass_rate": float(rates.mean()),
            "share_below_0.2": float((rates < 0.2).mean()),
        },
        "settings": {
            "steps": steps,
            "seeds": seeds,
            "batch_size": batch_size,
            "sim": asdict(sim),
            "features": features,
        },
        "arms": {},
    }
    configs = [parse_arm(spec, base) for spec in arms]  # a bad spec fails before any run
    bar = _bar(progress, len(configs) * seeds)
    for cfg in configs:
        runs = []
        for s in range(seeds):
            bar.set_description(f"{arm_label(cfg, base)} seed {s}")
            runs.append(
                run_arm(cfg, prompts, rates, steps=steps, batch_size=batch_size, seed=s, sim=sim, features=features)
            )
            bar.update(1)
        med = {k: np.median([r[k] for r in runs], axis=0).tolist() for k in runs[0]}
        summary = {
            "final_pass_rate": float(np.median([r["pass_rate"][-1] for r in runs])),
            "zero_signal_share": float(np.median([np.mean(r["zero_signal"]) for r in runs])),
            "samples_per_step": float(np.median([np.mean(r["samples_per_step"]) for r in runs])),
        }
        results["arms"][arm_label(cfg, base)] = {
            "config": cfg.to_dict(),
            "summary": summary,
            "median": med,
            "runs": runs,
        }
    bar.close()
    return results


def _bar(enabled: bool, total: int) -> Any:
    """A tqdm bar on stderr, or a stand-in that does nothing."""
    if enabled:
        from tqdm.auto import tqdm

        return tqdm(total=total, unit="run", dynamic_ncols=True)

    class _Null:
        def update(self, n: int) -> None: ...
        def set_description(self, d: str) -> None: ...
        def close(self) -> None: ...

    return _Null()


def write_results(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write `<out>.json` and `<out>.png` (atomically) and return their paths."""
    out.parent.mkdir(parents=True, exist_ok=True)
    js, png = out.with_suffix(".json"), out.with_suffix(".png")
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(js)
    plot_results(results, png)
    return js, png


def plot_results(results: dict[str, Any], png: Path) -> None:
    """Pass rate vs step (median, band over seeds) and vs samples, and the no-signal share, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for label, arm in results["arms"].items():
        runs = arm["runs"]
        pr = np.array([r["pass_rate"] for r in runs])
        steps = np.arange(pr.shape[1])
        (line,) = ax[0].plot(steps, np.median(pr, 0), label=label)
        ax[0].fill_between(steps, pr.min(0), pr.max(0), color=line.get_color(), alpha=0.15)
        ax[1].plot(np.median([r["samples"] for r in runs], 0), np.median(pr, 0), color=line.get_color())
        ax[2].plot(steps[1:], np.median([r["zero_signal"] for r in runs], 0), color=line.get_color())
    ax[0].set(xlabel="step", ylabel="mean pass rate (pool)", title="pass rate vs step (band: seed range)")
    ax[1].set(xlabel="samples generated", ylabel="mean pass rate (pool)", title="pass rate vs samples")
    ax[2].set(xlabel="step", ylabel="share of prompts", title="no-signal share per step", ylim=(0, 1))
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    tmp_png = png.with_name(png.stem + ".tmp.png")
    fig.savefig(tmp_png, dpi=110)
    plt.close(fig)
    tmp_png.replace(png)
