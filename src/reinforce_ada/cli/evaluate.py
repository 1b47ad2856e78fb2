"""`reinforce-ada eval`, and what it shares with `filter` and `features`: the model flags (`add_model_flags`), the
model, its threads, the datasets and the engines (`eval_setup`), then sampling and scoring. Every flag and file is
checked before torch is imported."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import check_generation_memory, check_sampling_flags, given, output_file
from reinforce_ada.cli.flags import Chosen, verifier_names
from reinforce_ada.engines.registry import ENGINES
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.registry import help_lines

DEFAULT_THREADS = 2
"""torch CPU threads of `eval`, `filter` and `features` when `--threads` is not given (fewer on a busy machine)."""


def add_model_choice(p: argparse.ArgumentParser) -> None:
    """--checkpoint or --model (one of them, required): the model a command loads."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="checkpoint folder, its model/ folder, or a run folder (latest checkpoint)")
    which.add_argument("--model", help="any local Hugging Face model folder (or LoRA adapter folder)")


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by `eval` and `filter`: which model, how to prompt, score and sample it."""
    add_model_choice(p)
    p.add_argument(
        "--prompt-key",
        default=None,
        help="file datasets: column holding the question (default: the run's, else prompt)",
    )
    p.add_argument(
        "--answer-key",
        default=None,
        help="file datasets: column holding the reference answer (default: the run's, else answer)",
    )
    p.add_argument("--template", default=None, help="plain, paper or chat (default: the run's, else plain)")
    p.add_argument(
        "--verifier",
        default=None,
        help=f"{verifier_names()} or module:function (default: the dataset's own, listed under --dataset; exact for "
        "files)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (the paper's 1.0)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="longest answer (default: the run's, else 512)")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts per dataset (seeded subset)")
    p.add_argument("--batch-size", type=int, default=512, help="sequences decoded together")
    p.add_argument("--seed", type=int, default=0, help="seeds the sampling and the --limit subset (default 0)")
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default 2, fewer on a busy machine, as train)"
    )
    p.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda (hf engine)")
    p.add_argument(
        "--engine",
        default="hf",
        choices=sorted(ENGINES),
        help=f"one of {', '.join(sorted(ENGINES))} (hf: CPU or GPU; vllm: GPU, unverified)",
    )


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser(
        "eval", help="Ave@k, pass@k and greedy accuracy on one or several benchmarks, with a size-weighted average"
    )
    add_model_flags(p)
    p.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help=f"repeatable; SPEC is a built-in ({help_lines(trainable=False)}) or a .jsonl/.csv/.parquet file; "
        "default: the run's own held-out split",
    )
    p.add_argument("--samples", type=int, default=8, help="k: samples per prompt (Ave@k; pass@1, 2, 4, ..., k)")
    p.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True, help="also greedy accuracy")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument(
        "--show-samples",
        type=int,
        default=0,
        metavar="N",
        help="print N scored completions per benchmark to stderr (the first 3 are always in --out's JSON, 'examples')",
    )
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--markdown", help="write the table as Markdown to this file")
    p.set_defaults(fn=cmd_eval)


def torch_threads(args: argparse.Namespace, on_cpu: bool) -> int:
    """`--threads` when given; else 2, lowered to the free cores on a busy machine with a note, as `train` does
    (`cpu_load.warn_if_oversubscribed`): 2 threads at load 20-40 kept an evaluation at 0/5 for 15 minutes."""
    from reinforce_ada.cpu_load import warn_if_oversubscribed

    explicit = args.threads is not None
    threads = args.threads if explicit else DEFAULT_THREADS
    return warn_if_oversubscribed(threads, explicit=explicit, flag="--threads") if on_cpu else threads


@dataclasses.dataclass
class EvalSetup:
    """What `eval` and `filter` share: the model, the run's config (or the defaults), the benchmarks, the engines."""

    folder: Path
    cfg: Any
    datasets: list[Any]
    tokenizer: Any
    template: str
    max_new_tokens: int
    engine: Any
    greedy: Any


def eval_setup(args: argparse.Namespace, specs: list[str]) -> EvalSetup:
    """Resolve the model folder and the run's [task] (built-in held-out splits follow its seed and sizes), read the
    datasets before loading the model (a bad spec fails in a second), then load it and build the engines."""
    from reinforce_ada.cpu_load import runs_on_cpu
    from reinforce_ada.evaluation.datasets import load_dataset
    from reinforce_ada.training.checkpoint import model_folder_for, run_config
    from reinforce_ada.training.config import TrainConfig

    check_sampling_flags(args)
    folder = model_folder_for(args.checkpoint, args.model)
    run_cfg = run_config(folder)
    cfg = run_cfg or TrainConfig()
    # a run's own column names unless told otherwise (a file of the same shape as the one it trained on)
    prompt_key = args.prompt_key or (cfg.task.prompt_key if run_cfg else "prompt")
    answer_key = args.answer_key or (cfg.task.answer_key if run_cfg else "answer")
    kw = {"prompt_key": prompt_key, "answer_key": answer_key, "limit": args.limit, "seed": args.seed}
    datasets = [load_dataset(spec, cfg.task, **kw) for spec in specs]
    max_new = args.max_new_tokens or (cfg.generation.max_new_tokens if run_cfg else 512)
    # the largest benchmark's samples are held at once; the run's held-out split has at most --limit or eval_size
    prompts = max((len(ds.prompts) for ds in datasets), default=args.limit or cfg.task.eval_size)
    check_generation_memory(
        folder, prompts, args.samples, max_new, args.batch_size, given=args.max_new_tokens is not None
    )
    threads = torch_threads(args, runs_on_cpu(args.device))
    from reinforce_ada.evaluation.loading import load_engines  # torch and transformers: only once all is checked

    t0 = time.perf_counter()
    print(f"loading {folder}", file=sys.stderr, flush=True)
    tok, eng, greedy = load_engines(
        folder,
        engine=args.engine,
        device=args.device,
        threads=threads,
        greedy=args.greedy,
        max_new_tokens=max_new,
        temperature=args.temperature,
        seed=args.seed,
        batch_size=args.batch_size,
    )
    print(f"loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return EvalSetup(folder, cfg, datasets, tok, args.template or cfg.task.template, max_new, eng, greedy)


def benchmarks(args: argparse.Namespace, e: EvalSetup) -> list[tuple[str, list, Any]]:
    """(name, templated prompts, verifier) of each `--dataset`, or of the run's own held-out split without one."""
    from reinforce_ada import tasks
    from reinforce_ada.evaluation.datasets import apply_template, held_out_name, subset
    from reinforce_ada.tasks import verifiers

    benches: list[tuple[str, list, Any]] = []
    if not e.datasets:  # the run's own held-out split, as the trainer evaluates it
        task = dataclasses.replace(e.cfg.task, template=e.template, verifier=args.verifier or e.cfg.task.verifier)
        _, held_out, verifier = tasks.build(task, e.tokenizer)
        benches.append((held_out_name(task), subset(held_out, args.limit, args.seed), verifier))
    for ds in e.datasets:
        prompts = apply_template(ds.prompts, e.template, e.tokenizer)
        name = args.verifier or ds.verifier
        verifiers.fit(name, ds.name, [(p.id, p.answer) for p in ds.prompts])  # e.g. `code` on arithmetic answers
        benches.append((ds.name, prompts, verifiers.build(name)))
    return benches


def cmd_eval(args: argparse.Namespace) -> int:
    from reinforce_ada.evaluation.datasets import parse_spec
    from reinforce_ada.evaluation.metrics import evaluate, markdown, pass_ks, weighted_average

    names = [parse_spec(s)[0] for s in args.dataset]
    if len(set(names)) != len(names):
        raise ConfigError(f"--dataset names must be unique, got {names}")
    given(args, "out", "markdown")
    reads = {f"--dataset {s}": parse_spec(s)[1] for s in args.dataset}  # no output may be a benchmark file it reads
    out_json = output_file("--out", args.out, inputs=reads) if args.out is not None else None  # sampling takes hours
    out_md = output_file("--markdown", args.markdown, inputs=reads) if args.markdown is not None else None
    e = eval_setup(args, args.dataset)
    benches = benchmarks(args, e)
    results: dict[str, Any] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    for i, (name, prompts, verifier) in enumerate(benches, start=1):
        greedy = " (+1 greedy)" if e.greedy is not None else ""
        print(
            f"[{i}/{len(benches)}] {name}: sampling {len(prompts)} prompts x {args.samples}{greedy}, up to "
            f"{e.max_new_tokens} new tokens each...",
            file=sys.stderr,
            flush=True,
        )
        t0 = time.perf_counter()
        ks = pass_ks(args.samples)
        from tqdm.auto import tqdm

        examples[name] = []
        with tqdm(total=len(prompts), desc=name, unit="prompt", dynamic_ncols=True, file=sys.stderr) as bar:
            results[name] = evaluate(
                e.engine,
                prompts,
                verifier,
                samples=args.samples,
                greedy_engine=e.greedy,
                ks=ks,
                progress=bar,
                examples=examples[name],
            )
        for x in examples[name][: args.show_samples]:  # what the model wrote, on request
            print(
                f"--- {name}: reward {x['reward']}, {x['num_tokens']} tokens ({x['finish_reason']})\n"
                f"[prompt] {x['prompt']}\n[completion] {x['completion']}\n[answer] {x['answer']}",
                file=sys.stderr,
            )
        print(f"[{i}/{len(benches)}] {name}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    average = weighted_average(results)
    settings = {
        "samples": args.samples,
        "temperature": args.temperature,
        "max_new_tokens": e.max_new_tokens,
        "template": e.template,
        "verifier": args.verifier,
        "limit": args.limit,
        "seed": args.seed,
        "command": "reinforce-ada eval " + " ".join(sys.argv[2:]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    # the weighted average also sits at the top level, so one-benchmark callers read `eval_accuracy` directly
    out = {"model": str(e.folder), **settings, **average, "datasets": results, "weighted_average": average}
    out["examples"] = examples  # the first completions of each benchmark, scored
    header = (
        f"`{e.folder}`: Ave@{args.samples} at T={args.temperature}, {e.max_new_tokens} new tokens, "
        f"template {e.template}; W.Avg weighted by benchmark size"
    )
    table = markdown(results, average, header)
    from reinforce_ada.training.gate import write_file

    for path, text in ((out_json, json.dumps(out, indent=1) + "\n"), (out_md, table)):
        if path is not None:  # atomic, never through a link at its name (a run folder's --out too: training.gate)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, text)
    print(json.dumps(out, indent=1) if args.json else table.rstrip("\n"))
    return 0
