"""Belief quality: how much of the oracle's draw does each belief recover before a prompt's first sample?

    python -m benchmarks.belief_quality                      # all four pools, writes belief_quality.{json,png}
    python -m benchmarks.belief_quality --pools mixed --seeds 2 --steps 50 --out /tmp/bq   # a smoke run

`bench.belief.replay_draw` replays `signal-draw`'s admission (`select=iw`, candidates 4, no weights) on each registered
pool of `compare`, the policy held at the shipped warm start, once per belief:
- `uniform`: the candidates' mean (what uniform admission gets in expectation);
- `oracle`: the exact rates (`iw-noweight`'s belief);
- `level-oracle`: each prompt's level's mean exact rate (the best any belief that knows only the level can do);
- `text+level`: the tracker + learned predictor as shipped (`signal-draw`'s belief: hashed text trigrams, level);
- `level`: the same predictor seeing only the level token;
- `text+level+hidden`: plus the policy's final hidden state at the prompt's last token (`models.features`),
  standardised over the pool;
- `hidden`: the hidden state alone;
- `text+level+confidence`, `confidence`: the same with the policy's first-token entropy and top log-probability
  (`models.features.first_token_confidence`, the same prefill), standardised over the pool, instead of the hidden
  state;
- `text+level s=32`: `signal-draw`'s belief with a prior of strength 32 instead of 2, so the predictor's mean counts as
  16 visits' worth of evidence rather than 1 (the Beta's spread, not its mean, is what differs).
Beside the replay, `bench.belief.within_level_probe` asks whether the hidden state and the confidence carry the rate
at all beyond the level: a ridge probe fitted on half of each level's prompts with their exact rates, its Spearman
correlation on the other half (an offline ceiling no online learner reaches).
Per belief: the admitted prompts' mean P(signal at n=4), its share of the oracle's gain over uniform, and the
Spearman correlation of the belief's mean with the exact rate over the candidates, all over the steps after
`--burn-in` (the predictor has seen burn-in x batch visits by then), mean over seeds with a 90% t-interval.
An exploratory diagnostic (not pre-registered): it says where the belief falls short, not what an arm gains.
"""

from __future__ import annotations

import argparse
import datetime
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import machine
from reinforce_ada.bench.arms import ARMS
from reinforce_ada.bench.belief import gain_share, replay_draw, within_level_probe
from reinforce_ada.bench.curves import T_95
from reinforce_ada.bench.testbed import BUILTIN_POOLS, build_pool, parse_pool
from reinforce_ada.models.features import first_token_confidence, prompt_hidden_states, standardise
from reinforce_ada.sampling.configure import parse_arm

RESULTS = Path(__file__).resolve().parent / "results"
BELIEFS = (
    "oracle",
    "level-oracle",
    "text+level",
    "level",
    "text+level+hidden",
    "hidden",
    "text+level+confidence",
    "confidence",
    "text+level s=32",
)


def t_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and 90% t-interval (arithmetic: shares and correlations may be 0 or negative)."""
    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, float("nan"), float("nan")
    t = T_95[len(x) - 2] if len(x) - 1 <= len(T_95) else 1.645
    h = float(t * x.std(ddof=1) / np.sqrt(len(x)))
    return m, m - h, m + h


def belief_inputs(name: str, prompts: list, dense: dict[str, np.ndarray]) -> tuple[list, Any]:
    """The prompts as the belief sees them, and its StrategyConfig."""
    cfg = parse_arm(ARMS["signal-draw"])
    if name in ("oracle", "level-oracle"):
        return prompts, cfg.replace(estimator="oracle")
    if name == "text+level s=32":
        return prompts, cfg.replace(prior_alpha=16.0, prior_beta=16.0)
    with_text = "text" in name
    with_level = "level" in name
    feats = next((x for key, x in dense.items() if key in name), None)
    out = []
    for i, p in enumerate(prompts):
        meta = {**p.meta, "features": feats[i].tolist()} if feats is not None else dict(p.meta)
        out.append(replace(p, text=p.text if with_text else "", level=p.level if with_level else None, meta=meta))
    return out, cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", default="mixed,default,hard,small", help="comma-separated built-in pool names")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200, help="steps per replay (the compute runs' length)")
    ap.add_argument("--burn-in", type=int, default=20, help="steps left out of the scores")
    ap.add_argument("--batch", type=int, default=16, help="prompts admitted per step (the compute runs' batch)")
    ap.add_argument("--n", type=int, default=4, help="samples per admitted prompt")
    ap.add_argument("--out", default=str(RESULTS / "belief_quality"), help="output path without suffix")
    args = ap.parse_args()
    names = [s.strip() for s in args.pools.split(",") if s.strip()]
    bad = [s for s in names if s not in BUILTIN_POOLS]
    if bad:
        ap.error(f"unknown pool(s) {bad}; choose from {sorted(BUILTIN_POOLS)}")
    if args.burn_in >= args.steps:
        ap.error(f"--burn-in {args.burn_in} must be below --steps {args.steps}")

    import torch

    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy
    from reinforce_ada.tasks.config import TaskConfig
    from reinforce_ada.training.warm_start import resolve_model_path

    torch.set_num_threads(1)
    model_path = str(resolve_model_path(ModelConfig(), TaskConfig(), progress=False))
    model, tok = load_policy(Path(model_path), ModelConfig(path=model_path, threads=1))
    results: dict[str, Any] = {
        "command": "python -m benchmarks.belief_quality "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "arm": ARMS["signal-draw"],
        "pools": {},
    }
    print(f"{'pool':8} {'belief':20} {'P(signal)':>22} {'gain share':>22} {'spearman':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            pool = build_pool(parse_pool(name), model, tok, Path(tmp))
            prompts, rates = list(pool.train), np.asarray(pool.train_rates)
            dense = {
                "hidden": standardise(prompt_hidden_states(model, tok, prompts)),
                "confidence": standardise(first_token_confidence(model, tok, prompts)),
            }
            levels = [p.level for p in prompts]
            probe = {key: within_level_probe(x, rates, levels) for key, x in dense.items()}
            for key, res in probe.items():
                print(f"{name:8} within-level probe on {key}: " + " ".join(f"{k} {v:.2f}" for k, v in res.items()))
            runs: dict[str, list] = {}
            levels = np.array([-1 if p.level is None else p.level for p in prompts])
            level_mean = np.array([rates[levels == lv].mean() for lv in levels])
            for belief in BELIEFS:
                ps, cfg = belief_inputs(belief, prompts, dense)
                seen = level_mean if belief == "level-oracle" else None
                runs[belief] = [
                    replay_draw(ps, rates, cfg, steps=args.steps, batch=args.batch, n=args.n, seed=s, oracle_rates=seen)
                    for s in range(args.seeds)
                ]
            b = args.burn_in
            uni = np.array([r.candidate_signal[b:].mean() for r in runs["oracle"]])
            orc = np.array([r.admitted_signal[b:].mean() for r in runs["oracle"]])
            entry: dict[str, Any] = {
                "prompts": len(prompts),
                "mean_rate": float(rates.mean()),
                "within_level_probe": probe,
                "beliefs": {},
            }
            entry["beliefs"]["uniform"] = {"signal": t_interval(uni)}
            print(f"{name:8} {'uniform':20} {_fmt(t_interval(uni))}")
            for belief, rs in runs.items():
                sig = np.array([r.admitted_signal[b:].mean() for r in rs])
                share = np.array([gain_share(s, u, o) for s, u, o in zip(sig, uni, orc, strict=True)])
                rho = np.array([np.nanmean(r.spearman[b:]) for r in rs])
                e = {"signal": t_interval(sig), "gain_share": t_interval(share), "spearman": t_interval(rho)}
                entry["beliefs"][belief] = e
                print(f"{name:8} {belief:20} {_fmt(e['signal'])} {_fmt(e['gain_share'])} {_fmt(e['spearman'])}")
            results["pools"][name] = entry
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(results, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and .png")
    return 0


def _fmt(ci: tuple[float, float, float]) -> str:
    return f"{ci[0]:6.3f} [{ci[1]:6.3f},{ci[2]:6.3f}]"


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pools = list(results["pools"])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    labels = ["uniform", *BELIEFS]
    width = 0.8 / len(pools)
    for j, pool in enumerate(pools):
        bel = results["pools"][pool]["beliefs"]
        m = [bel[b]["signal"][0] for b in labels]
        lo = [bel[b]["signal"][0] - bel[b]["signal"][1] for b in labels]
        hi = [bel[b]["signal"][2] - bel[b]["signal"][0] for b in labels]
        ax.bar(np.arange(len(labels)) + j * width, m, width, yerr=[lo, hi], label=pool)
    ax.set_xticks(np.arange(len(labels)) + width * (len(pools) - 1) / 2, labels, rotation=20, fontsize=8)
    ax.set_ylabel("admitted prompts' P(signal), n=4")
    ax.set_title(f"signal-draw's admission by belief, warm start held fixed ({results['date']})", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
