"""`reinforce-ada features`: its flags and its body (the machinery is `reinforce_ada.models.features`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from reinforce_ada.cli.checks import at_least, check_device, finite, output_file
from reinforce_ada.cli.evaluate import add_model_choice, torch_threads
from reinforce_ada.errors import ConfigError

if TYPE_CHECKING:
    from reinforce_ada.cli.flags import Chosen


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser(
        "features",
        help="write a prompt file with the policy's view of each prompt (a `features` column the predictor reads)",
        description="One prefill per prompt through the model: its last hidden state at the prompt's last token "
        "(--kind hidden), the entropy and top log-probability of its first answer token (confidence), or both, "
        "standardised over the file. The output is the dataset's rows plus `features`; a file task reads that column "
        "into Prompt.meta['features'] for estimator=predictor|both. The features are the given model's: as the policy "
        "trains they go stale (recompute from a checkpoint).",
    )
    add_model_choice(p)
    p.add_argument(
        "--dataset",
        required=True,
        metavar="SPEC",
        help="the prompt file to add features to (.jsonl/.csv/.parquet or a saved `datasets` folder)",
    )
    p.add_argument("--prompt-key", default=None, help="file datasets: the question's column (default: prompt)")
    p.add_argument("--answer-key", default=None, help="file datasets: the answer's column (default: answer)")
    p.add_argument(
        "--template", default=None, help="plain, paper or chat: as the policy will see the prompt (default: plain)"
    )
    p.add_argument("--kind", choices=["hidden", "confidence", "both"], default="hidden", help="what to compute")
    p.add_argument(
        "--standardise",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="z-score each value over the file and scale rows to about unit norm (the predictor's scale)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="confidence: the sampling temperature")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts (seeded subset)")
    p.add_argument("--seed", type=int, default=0, help="seeds the --limit subset")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per forward")
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default 2, fewer on a busy machine, as train)"
    )
    p.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda")
    p.add_argument("--out", required=True, help="JSONL to write: the dataset's rows with a `features` column")
    p.set_defaults(fn=cmd_features)


def cmd_features(args: argparse.Namespace) -> int:
    """The policy's own view of each prompt (`models.features`) as a `features` column the predictor reads. Every
    flag, the model folder and the dataset are checked before torch and transformers are imported."""
    from reinforce_ada.cpu_load import runs_on_cpu
    from reinforce_ada.evaluation.datasets import DATASETS, load_dataset, parse_spec
    from reinforce_ada.training.checkpoint import model_folder_for, run_config
    from reinforce_ada.training.config import TrainConfig

    at_least("--batch-size", args.batch_size)
    at_least("--threads", args.threads)
    at_least("--limit", args.limit)
    finite("--temperature", args.temperature, note=" > 0 (the confidence's sampling temperature)")
    if args.temperature <= 0:
        raise ConfigError(f"--temperature must be a finite number > 0, got {args.temperature}")
    check_device("--device", args.device)
    if parse_spec(args.dataset)[1] in DATASETS:
        raise ConfigError(
            f"--dataset {args.dataset}: a built-in benchmark is a held-out split, not training data; give a prompt "
            "file (.jsonl, .csv, .parquet) to add features to"
        )
    out = output_file("--out", args.out, inputs={"--dataset": parse_spec(args.dataset)[1]})
    folder = model_folder_for(args.checkpoint, args.model)
    run_cfg = run_config(folder)
    cfg = run_cfg or TrainConfig()
    keys = {
        "prompt_key": args.prompt_key or (cfg.task.prompt_key if run_cfg else "prompt"),
        "answer_key": args.answer_key or (cfg.task.answer_key if run_cfg else "answer"),
    }
    # the file's own features column (if any) is replaced, so it is not read (a malformed one cannot stop this)
    ds = load_dataset(args.dataset, cfg.task, limit=args.limit, seed=args.seed, features_key=None, **keys)
    threads = torch_threads(args, runs_on_cpu(args.device))
    import numpy as np
    import torch

    from reinforce_ada.evaluation.datasets import apply_template
    from reinforce_ada.evaluation.loading import load_model
    from reinforce_ada.models.features import prompt_features, standardise
    from reinforce_ada.models.load import resolve_device
    from reinforce_ada.training.run_dir import write_file

    resolve_device(args.device)  # CUDA asked for on a machine without it: one line, before the model loads
    torch.set_num_threads(threads)
    model, tok = load_model(folder, device=args.device)
    prompts = apply_template(ds.prompts, args.template or cfg.task.template, tok)
    print(f"{ds.name}: {len(prompts)} prompts through {folder} ({args.kind})", file=sys.stderr, flush=True)
    hidden, confidence = prompt_features(model, tok, prompts, batch_size=args.batch_size, temperature=args.temperature)
    parts = [v for kind, v in (("hidden", hidden), ("confidence", confidence)) if args.kind in (kind, "both")]
    x = np.hstack([standardise(v) for v in parts]) if args.standardise else np.hstack(parts)
    lines = [
        json.dumps({**row, "features": [round(float(v), 6) for v in feats]}, default=str)
        for row, feats in zip(ds.rows, x, strict=True)
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file(out, "".join(line + "\n" for line in lines))
    print(
        f"wrote {out}: {len(lines)} rows with a {x.shape[1]}-value `features` column; train on it with "
        f"--task.name file --task.path {out} --task.prompt_key {keys['prompt_key']} --task.answer_key "
        f"{keys['answer_key']} --task.template {args.template or cfg.task.template} --estimator both (and the "
        "verifier and model you train with)"
    )
    return 0
