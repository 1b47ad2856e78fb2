"""Belief quality: how much of the oracle's draw does each belief recover before a prompt's first sample?

    python -m studies.belief_quality.run                      # all four pools: records, belief_quality.{json,png}
    python -m studies.belief_quality.run --pools mixed --seeds 2 --steps 50 --out /tmp/bq/belief_quality   # smoke
    python -m studies.belief_quality.regenerate               # the committed results from the records

`belief.replay_draw` replays `signal-draw`'s admission (`select=iw`, candidates 4, no weights) on each registered
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
Beside the replay, `belief.within_level_probe` asks whether the hidden state and the confidence carry the rate
at all beyond the level: a ridge probe fitted on half of each level's prompts with their exact rates, its Spearman
correlation on the other half (an offline ceiling no online learner reaches).
Per belief: the admitted prompts' mean P(signal at n=4), its share of the oracle's gain over uniform, and the
Spearman correlation of the belief's mean with the exact rate over the candidates, all over the steps after
`--burn-in` (the predictor has seen burn-in x batch visits by then), mean over seeds with a 90% t-interval.
An exploratory diagnostic (not pre-registered): it says where the belief falls short, not what an arm gains.
Each replay's three scores (after the burn-in) go to the study's records, one line per pool, belief and seed; the
JSON and the figure are written from them (`regenerate.write_belief`).
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import machine
from reinforce_ada.bench.arms import ARMS
from reinforce_ada.bench.testbed import BUILTIN_POOLS, build_pool, parse_pool
from reinforce_ada.models.features import first_token_confidence, prompt_hidden_states, standardise
from reinforce_ada.sampling.configure import parse_arm
from studies.belief_quality.belief import replay_draw, within_level_probe
from studies.belief_quality.report import BELIEFS

RESULTS = Path(__file__).resolve().parent / "results"


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
        "command": "python -m studies.belief_quality.run "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "arm": ARMS["signal-draw"],
        "pools": {},
    }
    lines: list[dict[str, Any]] = []
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
            levels = np.array([-1 if p.level is None else p.level for p in prompts])
            level_mean = np.array([rates[levels == lv].mean() for lv in levels])
            for belief in BELIEFS:
                ps, cfg = belief_inputs(belief, prompts, dense)
                seen = level_mean if belief == "level-oracle" else None
                for s in range(args.seeds):
                    r = replay_draw(
                        ps, rates, cfg, steps=args.steps, batch=args.batch, n=args.n, seed=s, oracle_rates=seen
                    )
                    b = args.burn_in
                    lines.append(
                        {
                            "id": f"{name}/{belief}/seed{s}",
                            "pool": name,
                            "belief": belief,
                            "seed": s,
                            "admitted": float(r.admitted_signal[b:].mean()),
                            "candidates": float(r.candidate_signal[b:].mean()),
                            "spearman": float(np.nanmean(r.spearman[b:])),
                        }
                    )
            results["pools"][name] = {
                "prompts": len(prompts),
                "mean_rate": float(rates.mean()),
                "within_level_probe": probe,
            }
    from studies.belief_quality.regenerate import write_belief
    from studies.protocol import records

    out = Path(args.out)
    ctx = {"name": out.name, "meta": results, "runs": {p: [x["id"] for x in lines if x["pool"] == p] for p in names}}
    ctx["burn_in"] = args.burn_in  # the scores are means over the steps after it
    records.update(out.parent / "records.jsonl.gz", ctx, lines)
    write_belief(ctx, {x["id"]: x for x in lines}, out.parent)
    print(f"wrote {out.parent / 'records.jsonl.gz'}, {out.with_suffix('.json')} and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
