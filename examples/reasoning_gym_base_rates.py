"""Base pass rates per level of a model on the reasoning-gym family: where to start training.

    python examples/reasoning_gym_base_rates.py --model models/smollm2 --out docs/reasoning_gym_base_rates.json

One `reinforce-ada eval` over every dataset of the family (`tasks.reasoning.FAMILY`): a seeded subset of `--limit`
held-out prompts per dataset (about `--limit / 5` per level), `--samples` samples each at temperature 1, the chat
template, short answers. The JSON adds what `eval --out` does not say: the machine, the load, the wall-clock time,
the prompts per level, and whether the embedded tiny model can read the questions at all.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path


def tiny_model_fit() -> dict:
    """How many held-out questions the embedded tiny model could even read: every character in its alphabet and the
    question inside its 64 positions with room for an answer."""
    from reinforce_ada.models.tiny import CHARS, TinyModelConfig
    from reinforce_ada.tasks.reasoning import FAMILY, make_split

    room = TinyModelConfig().max_position - 8
    out = {}
    for name in FAMILY:
        held_out = make_split(name, train_size=0, eval_size=20, seed=0)[1]
        readable = [p for p in held_out if set(p.text) <= set(CHARS) and len(p.text) <= room]
        shortest = min(len(p.text) for p in held_out)
        out[name] = {"questions": len(held_out), "readable": len(readable), "shortest_chars": shortest}
    return {"alphabet": CHARS, "context": TinyModelConfig().max_position, "per_dataset": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--out", default="docs/reasoning_gym_base_rates.json")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from reinforce_ada.cli import main as cli
    from reinforce_ada.evaluation.datasets import load_dataset
    from reinforce_ada.tasks.config import TaskConfig
    from reinforce_ada.tasks.reasoning import FAMILY, PREFIX
    from reinforce_ada.training.warm_start import machine

    names = [PREFIX + n for n in FAMILY]
    argv = ["eval", "--model", args.model, "--template", "chat", "--samples", str(args.samples), "--no-greedy"]
    argv += ["--limit", str(args.limit), "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads)]
    for n in names:
        argv += ["--dataset", n]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cli([*argv, "--out", f"{tmp}/eval.json"])
        result = json.loads(Path(f"{tmp}/eval.json").read_text())
    seconds = time.perf_counter() - t0
    per_level = {}
    for n in names:
        prompts = load_dataset(n, TaskConfig(), limit=args.limit).prompts
        counts = Counter(p.level for p in prompts)
        rates = result["datasets"][n]
        per_level[n] = {
            f"L{k}": {"prompts": counts[k], "ave@k": round(rates[f"eval_accuracy_L{k}"], 4)} for k in sorted(counts)
        }
    record = {
        "what": "base pass rate (Ave@k, temperature 1) per level of each reasoning-gym family dataset",
        "command": "python examples/reasoning_gym_base_rates.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
        "eval_command": "reinforce-ada " + " ".join(argv),
        "date": result["date"],
        "machine": machine(),
        "cores": os.cpu_count(),
        "load_average": {"start": round(load0, 2), "end": round(os.getloadavg()[0], 2)},
        "seconds": round(seconds, 1),
        "model": args.model,
        "samples": args.samples,
        "max_new_tokens": args.max_new_tokens,
        "template": "chat",
        "per_level": per_level,
        "overall": {n: round(result["datasets"][n]["eval_accuracy"], 4) for n in names},
        "verifier_errors": {n: result["datasets"][n]["eval_verifier_errors"] for n in names},
        "examples": result.get("examples"),
        "tiny_model": tiny_model_fit(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
