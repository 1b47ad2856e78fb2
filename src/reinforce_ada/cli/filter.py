"""`reinforce-ada filter`: the paper's difficulty filter, keeping the prompts whose base pass rate lies in (lo, hi]
(`evaluation.filter`); the model and datasets as `eval` loads them (`cli.evaluate.eval_setup`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reinforce_ada.cli.checks import given, output_file
from reinforce_ada.cli.evaluate import add_model_flags, eval_setup
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.registry import benchmark_names

if TYPE_CHECKING:
    from reinforce_ada.cli.flags import Chosen


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser("filter", help="the paper's difficulty filter: keep prompts with base pass rate in (lo, hi]")
    add_model_flags(p)
    p.add_argument(
        "--dataset",
        required=True,
        metavar="SPEC",
        help=f"a built-in benchmark ({', '.join(benchmark_names())}) or a .jsonl/.csv/.parquet file",
    )
    p.add_argument("--samples", type=int, default=16, help="k answers per prompt (the paper's 16)")
    p.add_argument("--lo", type=float, default=0.0, help="keep pass rates above this (default 0: >= 1 correct)")
    p.add_argument(
        "--hi", type=float, default=0.375, help="keep pass rates at or below this (paper 0.375; official code 0.313)"
    )
    p.add_argument("--out", required=True, help="filtered JSONL: the kept rows with a `pass_rate` field")
    p.add_argument("--plot", help="pass-rate histogram PNG (default: --out with .png)")
    p.add_argument(
        "--rates",
        metavar="FILE",
        help="also write every prompt's pass rate, kept or not (JSONL: id, prompt, pass_rate, samples): a prior file "
        "for --prior-file that knows the all-wrong and all-right prompts too",
    )
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(fn=cmd_filter, greedy=False)


def cmd_filter(args: argparse.Namespace) -> int:
    from reinforce_ada.evaluation.datasets import apply_template, parse_spec
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
    given(args, "dataset", "out", "plot", "rates")
    reads = {"--dataset": parse_spec(args.dataset)[1]}  # no output may be the file it filters
    out = output_file("--out", args.out, inputs=reads)  # checked now: sampling can take hours
    png = Path(args.plot) if args.plot is not None else out.with_suffix(".png")
    output_file("--plot" if args.plot is not None else "--out", png, inputs=reads)
    every = output_file("--rates", args.rates, inputs=reads) if args.rates is not None else None
    if every is not None and every.suffix not in (".jsonl", ".json"):  # it is read back by suffix (`sampling.memory`)
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
            if args.lo < rate <= args.hi:  # keyed as a prior file reads it (`sampling.memory`), whatever the columns
                if row.get("prompt", prompt.text) != prompt.text:
                    clash.add("prompt")
                if str(row.get("samples", args.samples)) != str(args.samples):  # a CSV's "4" is 4
                    clash.add("samples")
                extra = {"prompt": prompt.text, "pass_rate": rate, "samples": args.samples}  # id, else this text
                fh.write(json.dumps({**row, **extra}, default=str) + "\n")
    if every is not None:  # every prompt, as a prior file reads it (`sampling.memory`): the row's own id, else the text
        every.parent.mkdir(parents=True, exist_ok=True)
        with every.open("w") as fh:
            for row, prompt, rate in zip(ds.rows, ds.prompts, rates, strict=True):
                key = {"id": row["id"]} if row.get("id") not in (None, "") else {}
                line = {**key, "prompt": prompt.text, "pass_rate": rate, "samples": args.samples}
                fh.write(json.dumps(line, default=str) + "\n")
    if clash:
        print(f"note: {out} replaces the dataset's own {sorted(clash)} column(s) with the prompt text and the sample "
              "count, as a prior file reads them (sampling.memory)", file=sys.stderr)  # fmt: skip
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
