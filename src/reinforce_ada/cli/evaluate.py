"""The bodies of `reinforce-ada eval` and `filter`: the model, its threads, the datasets and the engines they share
(`eval_setup`), then sampling and scoring. Every flag and file is checked before torch is imported."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import check_generation_memory, check_sampling_flags, output_file
from reinforce_ada.errors import ConfigError

DEFAULT_THREADS = 2
"""torch CPU threads of `eval`, `filter` and `features` when `--threads` is not given (fewer on a busy machine)."""


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


def cmd_eval(args: argparse.Namespace) -> int:
    from reinforce_ada import tasks
    from reinforce_ada.evaluation.datasets import apply_template, parse_spec, subset
    from reinforce_ada.evaluation.metrics import evaluate, markdown, pass_ks, weighted_average
    from reinforce_ada.tasks import verifiers

    names = [parse_spec(s)[0] for s in args.dataset]
    if len(set(names)) != len(names):
        raise ConfigError(f"--dataset names must be unique, got {names}")
    out_json = output_file("--out", args.out) if args.out else None  # checked now: sampling can take hours
    out_md = output_file("--markdown", args.markdown) if args.markdown else None
    e = eval_setup(args, args.dataset)
    benches: list[tuple[str, list, Any]] = []
    if not e.datasets:  # the run's own held-out split, as the trainer evaluates it
        task = dataclasses.replace(e.cfg.task, template=e.template, verifier=args.verifier or e.cfg.task.verifier)
        _, held_out, verifier = tasks.build(task, e.tokenizer)
        benches.append((task.name, subset(held_out, args.limit, args.seed), verifier))
    for ds in e.datasets:
        prompts = apply_template(ds.prompts, e.template, e.tokenizer)
        name = args.verifier or ds.verifier
        verifiers.fit(name, ds.name, [(p.id, p.answer) for p in ds.prompts])  # e.g. `code` on arithmetic answers
        benches.append((ds.name, prompts, verifiers.build(name)))
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
    for path, text in ((out_json, json.dumps(out, indent=1) + "\n"), (out_md, table)):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    print(json.dumps(out, indent=1) if args.json else table.rstrip("\n"))
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    from reinforce_ada.evaluation.datasets import apply_template
    from reinforce_ada.evaluation.filter import (
        buckets,
        check_bounds,
        format_buckets,
        pass_rates,
        plot_histogram,
        summary,
    )
    from reinforce_ada.evaluation.metrics import sample_correct
    from reinforce_ada.tasks import verifiers

    check_bounds(args.lo, args.hi)
    out = output_file("--out", args.out)  # checked now: sampling can take hours
    png = Path(args.plot) if args.plot else out.with_suffix(".png")
    output_file("--plot" if args.plot else "--out", png)
    every = output_file("--rates", args.rates) if args.rates else None
    if every is not None and every.suffix not in (
        ".jsonl",
        ".json",
    ):  # it is read back by suffix (`sampling.memory.priors`)
        raise ConfigError(f"--rates {args.rates}: it writes JSON Lines; name it .jsonl")
    if every is not None and every.resolve() in (out.resolve(), png.resolve()):
        raise ConfigError(f"--rates {args.rates}: the same file as --out or --plot; give another")
    e = eval_setup(args, [args.dataset])
    ds = e.datasets[0]
    verifier = verifiers.build(args.verifier or ds.verifier)
    prompts = apply_template(ds.prompts, e.template, e.tokenizer)
    print(f"{ds.name}: {len(prompts)} prompts x {args.samples} samples from {e.folder}", file=sys.stderr)
    from tqdm.auto import tqdm

    with tqdm(total=len(prompts), desc=ds.name, unit="prompt", dynamic_ncols=True, file=sys.stderr) as bar:
        correct, errors = sample_correct(e.engine, prompts, verifier, samples=args.samples, progress=bar)
    rates = pass_rates(correct, [p.id for p in prompts])
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        clash = set()
        for row, prompt, rate in zip(ds.rows, ds.prompts, rates, strict=True):
            if (
                args.lo < rate <= args.hi
            ):  # keyed as a prior file reads it (`sampling.memory.priors`), whatever the columns
                if row.get("prompt", prompt.text) != prompt.text:
                    clash.add("prompt")
                if str(row.get("samples", args.samples)) != str(args.samples):  # a CSV's "4" is 4
                    clash.add("samples")
                extra = {"prompt": prompt.text, "pass_rate": rate, "samples": args.samples}  # id, else this text
                fh.write(json.dumps({**row, **extra}, default=str) + "\n")
    if (
        every is not None
    ):  # every prompt, as a prior file reads it (`sampling.memory.priors`): the row's own id, else the text
        every.parent.mkdir(parents=True, exist_ok=True)
        with every.open("w") as fh:
            for row, prompt, rate in zip(ds.rows, ds.prompts, rates, strict=True):
                key = {"id": row["id"]} if row.get("id") not in (None, "") else {}
                line = {**key, "prompt": prompt.text, "pass_rate": rate, "samples": args.samples}
                fh.write(json.dumps(line, default=str) + "\n")
    if clash:
        print(f"note: {out} replaces the dataset's own {sorted(clash)} column(s) with the prompt text and the sample "
              "count, as a prior file reads them (sampling.memory.priors)", file=sys.stderr)  # fmt: skip
    bs = buckets(rates, args.lo, args.hi)
    plot_histogram(bs, png, lo=args.lo, hi=args.hi, title=f"{ds.name}: pass rate over {args.samples} samples")
    s = {**summary(rates, args.lo, args.hi), "samples": args.samples, "verifier_errors": errors}
    if args.json:
        print(json.dumps({**s, "buckets": [dataclasses.asdict(b) for b in bs], "out": str(out), "plot": str(png)}))
        return 0
    print(format_buckets(bs, args.samples))
    print(
        f"kept {s['kept']} of {s['prompts']} prompts with pass rate in ({args.lo:g}, {args.hi:g}]; dropped "
        f"{s['too_hard']} at or below {args.lo:g} and {s['too_easy']} above {args.hi:g}"
    )
    print(f"wrote {out}{f', {every}' if every is not None else ''} and {png}")
    return 0
