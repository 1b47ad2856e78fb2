"""Side-by-side convergence benchmark on the embedded testbed (`reinforce-ada compare`, benchmarks/convergence.py).

1) Every arm trains the same warm-started tiny Llama on the same pool (concentrated on the levels where the
   warm-started model's pass rate is 0.02-0.2, where GRPO-n4 mostly draws all-wrong groups), with the same seeds,
   learning rate and number of steps; only the sampling strategy differs.
2) The budget-matched GRPO arm's n is set after Ada-Seq-balance has run: its samples per step equal Seq-balance's
   median average.
3) Accuracy is the held-out Ave@k on the pool's levels, weighted like the pool ("pool accuracy"), smoothed as the
   running mean of the last 3 evaluations. The target is GRPO-n4's median smoothed final pool accuracy, so
   GRPO-n4 needs about the whole run to reach it by construction and the question is how much sooner other arms do.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.training.config import TrainConfig, apply_overrides

ARMS: dict[str, dict[str, Any]] = {
    "grpo-n4": {"name": "uniform", "n": 4},
    "grpo-n8": {"name": "uniform", "n": 8},
    "grpo-n16": {"name": "uniform", "n": 16},
    "dapo-n4": {"name": "dynamic", "n": 4},
    "seq-pos": {"name": "seq", "exit": "positive"},
    "seq-bal": {"name": "seq", "exit": "balanced"},
    "est": {"name": "est"},
    "grpo-matched": {"name": "uniform"},  # n filled in from seq-bal's samples per step
}
POOL_WEIGHTS = (0.0, 0.0, 0.05, 0.15, 0.3, 0.35, 0.15)
"""Training-pool share per level (1+1 ... 5+5 digits): mostly levels 4-6, where the warm start's pass rate is low."""


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    steps: int = 300
    seeds: int = 3
    batch_size: int = 32
    lr: float = 2e-4
    eval_every: int = 25
    eval_per_level: int = 256
    eval_samples: int = 4
    arms: tuple[str, ...] = tuple(ARMS)
    out: str = "benchmarks/results/convergence"
    run_root: str = "runs/compare"
    pool_probe_prompts: int = 512
    pool_probe_samples: int = 32


def arm_config(arm: str, seed: int, c: CompareConfig, matched_n: int | None = None) -> TrainConfig:
    strategy = dict(ARMS[arm])
    if arm == "grpo-matched":
        if matched_n is None:
            raise ValueError("grpo-matched needs seq-bal's samples per step first")
        strategy["n"] = matched_n
    return apply_overrides(
        TrainConfig(),
        {
            "strategy": strategy,
            "task": {"level_weights": list(POOL_WEIGHTS)},
            "optim": {"lr": c.lr},
            "run": {
                "steps": c.steps,
                "batch_size": c.batch_size,
                "seed": seed,
                "eval_every": c.eval_every,
                "eval_samples": c.eval_samples,
                "save_every": c.steps,
                "progress": False,
                "run_dir": f"{c.run_root}/{arm}/seed{seed}",
            },
        },
        "compare",
    )


def run_one(cfg: TrainConfig, eval_per_level: int) -> list[dict[str, Any]]:
    import shutil

    from reinforce_ada.training.trainer import Trainer

    shutil.rmtree(cfg.run.run_dir, ignore_errors=True)
    tr = Trainer(cfg, tensorboard=False)
    by_level: dict[Any, list] = {}
    for p in tr.eval_prompts:
        by_level.setdefault(p.level, []).append(p)
    tr.eval_prompts = [p for ps in by_level.values() for p in ps[:eval_per_level]]
    tr.fit()
    return [json.loads(x) for x in (Path(cfg.run.run_dir) / "metrics.jsonl").read_text().splitlines()]


def pool_accuracy(row: dict[str, Any]) -> float:
    w = np.array(POOL_WEIGHTS) / sum(POOL_WEIGHTS)
    return float(sum(wi * row[f"eval_accuracy_L{i + 1}"] for i, wi in enumerate(w) if wi > 0))


def curves(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per-eval curves (step, smoothed pool accuracy, cumulative samples/tokens) and per-step series."""
    train = [r for r in rows if "loss" in r]
    cum_s = np.cumsum([0] + [r["samples_generated"] for r in train])
    cum_t = np.cumsum([0] + [r["tokens_generated"] for r in train])
    evals = [r for r in rows if "eval_accuracy" in r]
    acc = np.array([pool_accuracy(r) for r in evals])
    smooth = np.array([acc[max(0, i - 2) : i + 1].mean() for i in range(len(acc))])
    steps = [r["step"] for r in evals]
    return {
        "eval_step": steps,
        "pool_accuracy": acc.tolist(),
        "pool_accuracy_smooth": smooth.tolist(),
        "eval_samples_cum": [float(cum_s[s]) for s in steps],
        "eval_tokens_cum": [float(cum_t[s]) for s in steps],
        "no_signal_share": [r["no_signal_prompt_share"] for r in train],
        "zero_adv_share": [r["zero_adv_prompt_share"] for r in train],
        "samples_per_step": [r["samples_generated"] for r in train],
        "time_generate_s": [r["time_generate_s"] for r in train],
        "time_train_s": [r["time_train_s"] for r in train],
        "time_step_s": [r["time_step_s"] for r in train],
        "final_per_level": {k[14:]: v for k, v in evals[-1].items() if k.startswith("eval_accuracy_L")},
    }


def first_reach(c: dict[str, list[float]], target: float) -> dict[str, float | None]:
    for i, a in enumerate(c["pool_accuracy_smooth"]):
        if a >= target and c["eval_step"][i] > 0:
            return {"steps": c["eval_step"][i], "samples": c["eval_samples_cum"][i], "tokens": c["eval_tokens_cum"][i]}
    return {"steps": None, "samples": None, "tokens": None}


def med_range(xs: Sequence[float | None]) -> dict[str, Any]:
    vals = [x for x in xs if x is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "reached": 0, "of": len(xs)}
    # an arm that missed the target on some seeds: median over seeds counting misses as +inf
    full = sorted(vals) + [float("inf")] * (len(xs) - len(vals))
    m = float(np.median(full))
    return {
        "median": m if np.isfinite(m) else None,
        "min": min(vals),
        "max": max(vals),
        "reached": len(vals),
        "of": len(xs),
    }


def probe_pool(c: CompareConfig) -> dict[str, Any]:
    """Per-prompt pass rates of the warm-started model on a sample of the training pool (histogram for the report)."""
    from reinforce_ada.training.trainer import Trainer
    from reinforce_ada.types import Request

    cfg = arm_config("grpo-n4", 0, c)
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, run_dir=f"{c.run_root}/_probe"))
    tr = Trainer(cfg, tensorboard=False)
    rng = np.random.default_rng(0)
    pool = [tr.train_prompts[i] for i in rng.permutation(len(tr.train_prompts))[: c.pool_probe_prompts]]
    samples = tr.engine.generate([Request(p, c.pool_probe_samples) for p in pool])
    by = {p.id: p for p in pool}
    rates: dict[str, list[float]] = {}
    for s in samples:
        rates.setdefault(s.prompt_id, []).append(tr.verifier(s.text, by[s.prompt_id].answer))
    p_hat = np.array([np.mean(rates[p.id]) for p in pool])
    return {
        "pass_rates": p_hat.tolist(),
        "share_below_0.2": float((p_hat < 0.2).mean()),
        "share_0.02_to_0.2": float(((p_hat >= 0.02) & (p_hat < 0.2)).mean()),
        "share_zero": float((p_hat == 0).mean()),
        "mean": float(p_hat.mean()),
        "samples_per_prompt": c.pool_probe_samples,
    }


def run_compare(c: CompareConfig, log=print) -> dict[str, Any]:
    results: dict[str, Any] = {"config": dataclasses.asdict(c), "pool_weights": POOL_WEIGHTS, "arms": {}}
    results["date"] = datetime.date.today().isoformat()
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    results["pool"] = probe_pool(c)
    log(f"pool: {results['pool']['share_below_0.2']:.0%} of prompts below p=0.2, mean p {results['pool']['mean']:.3f}")
    order = [a for a in c.arms if a != "grpo-matched"] + (["grpo-matched"] if "grpo-matched" in c.arms else [])
    matched_n = None
    for arm in order:
        if arm == "grpo-matched":
            seq = results["arms"].get("seq-bal")
            if seq is None:
                raise ValueError("grpo-matched needs the seq-bal arm in the same run")
            matched_n = max(1, round(np.median([np.mean(r["samples_per_step"]) for r in seq["runs"]]) / c.batch_size))
        runs = []
        for seed in range(c.seeds):
            cur = curves(run_one(arm_config(arm, seed, c, matched_n), c.eval_per_level))
            runs.append(cur)
            log(
                f"{arm:<13} seed {seed}: final pool acc {cur['pool_accuracy'][-1]:.3f}, "
                f"{np.mean(cur['samples_per_step']):.0f} samples/step, {np.mean(cur['time_step_s']):.3f} s/step"
            )
        results["arms"][arm] = {"runs": runs, "n": matched_n if arm == "grpo-matched" else ARMS[arm].get("n")}
    summarize(results)
    return results


ADA_ARMS = ("seq-pos", "seq-bal", "est")


def summarize(results: dict[str, Any]) -> None:
    arms = results["arms"]
    ref = arms.get("grpo-n4") or next(iter(arms.values()))
    target = float(np.median([r["pool_accuracy_smooth"][-1] for r in ref["runs"]]))
    results["target_pool_accuracy"] = target
    results["start_pool_accuracy"] = float(np.median([r["pool_accuracy"][0] for r in ref["runs"]]))
    table = {}
    for arm, a in arms.items():
        reach = [first_reach(r, target) for r in a["runs"]]
        table[arm] = {
            "n": a["n"],
            "steps_to_target": med_range([x["steps"] for x in reach]),
            "samples_to_target": med_range([x["samples"] for x in reach]),
            "tokens_to_target": med_range([x["tokens"] for x in reach]),
            "final_pool_accuracy": med_range([r["pool_accuracy_smooth"][-1] for r in a["runs"]]),
            "no_signal_share": med_range([float(np.mean(r["no_signal_share"])) for r in a["runs"]]),
            "zero_adv_share": med_range([float(np.mean(r["zero_adv_share"])) for r in a["runs"]]),
            "samples_per_step": med_range([float(np.mean(r["samples_per_step"])) for r in a["runs"]]),
            "time_step_s": med_range([float(np.median(r["time_step_s"])) for r in a["runs"]]),
            "time_generate_s": med_range([float(np.median(r["time_generate_s"])) for r in a["runs"]]),
            "time_train_s": med_range([float(np.median(r["time_train_s"])) for r in a["runs"]]),
            "final_per_level": {
                k: float(np.median([r["final_per_level"][k] for r in a["runs"]]))
                for k in a["runs"][0]["final_per_level"]
            },
        }
    results["table"] = table
    results["goals"] = goals(table)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else float(a / b)


def goals(t: dict[str, Any]) -> dict[str, Any]:
    def med(arm: str, key: str) -> float | None:
        return t[arm][key]["median"] if arm in t else None

    ada = [a for a in ADA_ARMS if a in t and med(a, "tokens_to_target") is not None]
    best = min(ada, key=lambda a: med(a, "tokens_to_target")) if ada else None
    return {
        "P1": {
            "value": _ratio(med("grpo-n4", "steps_to_target"), med("seq-bal", "steps_to_target")),
            "goal": ">= 2.0",
            "what": "steps to target, GRPO-n4 / Ada-Seq-balanced",
        },
        "P2": {
            "value": _ratio(med("grpo-matched", "tokens_to_target"), med(best, "tokens_to_target") if best else None),
            "goal": ">= 1.5",
            "what": f"generated tokens to target, budget-matched GRPO / best Ada arm ({best})",
        },
        "P3": {
            "value": _ratio(med("seq-bal", "no_signal_share"), med("grpo-n4", "no_signal_share")),
            "goal": "<= 0.20",
            "what": "share of a step's prompts without gradient, Ada-Seq-balanced / GRPO-n4",
            "seq_bal": med("seq-bal", "no_signal_share"),
            "grpo_n4": med("grpo-n4", "no_signal_share"),
        },
        "P4": {
            "value": _ratio(med("seq-bal", "time_step_s"), med("grpo-n4", "time_step_s")),
            "goal": "<= 1.3",
            "what": "wall-clock per step, Ada-Seq-balanced / GRPO-n4 (each arm in the trainer's default mode)",
        },
    }


def write(results: dict[str, Any], out: str | Path, command: str) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results["command"] = command
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    js, png = out.with_suffix(".json"), out.with_suffix(".png")
    tmp = js.with_name(f".{js.name}.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(js)
    fig, ax = plt.subplots(1, 4, figsize=(21, 4.5))
    for i, (arm, a) in enumerate(results["arms"].items()):
        col = f"C{i}"
        steps = a["runs"][0]["eval_step"]
        acc = np.array([r["pool_accuracy_smooth"] for r in a["runs"]])
        label = f"{arm} (n={a['n']})" if arm == "grpo-matched" else arm
        ax[0].plot(steps, np.median(acc, 0), color=col, label=label)
        ax[0].fill_between(steps, acc.min(0), acc.max(0), color=col, alpha=0.12)
        tok = np.median([r["eval_tokens_cum"] for r in a["runs"]], 0)
        ax[1].plot(tok, np.median(acc, 0), color=col)
        ns = np.median([r["no_signal_share"] for r in a["runs"]], 0)
        k = min(10, len(ns))
        ax[2].plot(np.arange(1, len(ns) + 1)[k - 1 :], np.convolve(ns, np.ones(k) / k, "valid"), color=col)
    for a_ in ax[:2]:
        a_.axhline(results["target_pool_accuracy"], color="k", ls=":", lw=1)
    ax[0].set(xlabel="RL step", ylabel="held-out pool accuracy (smoothed)", title="accuracy vs step (band: seeds)")
    ax[1].set(xlabel="generated tokens", ylabel="held-out pool accuracy", title="accuracy vs generated tokens")
    ax[2].set(xlabel="RL step", ylabel="share", ylim=(0, 1), title="prompts without gradient (10-step mean)")
    ax[3].hist(results["pool"]["pass_rates"], bins=np.linspace(0, 1, 26), color="gray")
    ax[3].set(
        xlabel="warm-start pass rate",
        ylabel="prompts",
        title=f"pool pass rates ({results['pool']['share_below_0.2']:.0%} below 0.2)",
    )
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    tmp_png = png.with_name(f".{png.stem}.tmp.png")
    fig.savefig(tmp_png, dpi=100)
    plt.close(fig)
    tmp_png.replace(png)
    return js, png


def format_table(results: dict[str, Any]) -> str:
    lines = [
        f"target pool accuracy {results['target_pool_accuracy']:.3f} (start {results['start_pool_accuracy']:.3f})",
        f"{'arm':<14}{'steps→T':>9}{'samples→T':>11}{'tokens→T':>10}{'final acc':>10}{'no-signal':>10}"
        f"{'smp/step':>9}{'s/step':>8}{'gen s':>7}{'train s':>8}",
    ]

    def f(x: Any, fmt: str) -> str:
        return "—" if x is None else format(x, fmt)

    for arm, r in results["table"].items():
        lines.append(
            f"{arm:<14}{f(r['steps_to_target']['median'], '.0f'):>9}{f(r['samples_to_target']['median'], '.3g'):>11}"
            f"{f(r['tokens_to_target']['median'], '.3g'):>10}{r['final_pool_accuracy']['median']:>10.3f}"
            f"{r['no_signal_share']['median']:>10.3f}{r['samples_per_step']['median']:>9.0f}"
            f"{r['time_step_s']['median']:>8.3f}{r['time_generate_s']['median']:>7.3f}{r['time_train_s']['median']:>8.3f}"
        )
    for k, g in results["goals"].items():
        lines.append(f"{k}: {f(g['value'], '.3f')} (goal {g['goal']}) — {g['what']}")
    return "\n".join(lines)
