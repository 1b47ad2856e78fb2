"""The bodies of the `reinforce-ada` commands: parse nothing, validate, call the library, print.

Each `cmd_*` takes the parsed arguments and returns the exit status; bad input raises `ConfigError`, which `main`
turns into exit status 2 and a one-line message.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import io
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import (
    check_generation_memory,
    check_monte_carlo,
    check_sampling_flags,
    check_simulate_flags,
    free_stem,
    input_file,
    output_file,
)
from reinforce_ada.cli.flags import strategy_from_args, train_config_from_args
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import arm_label
from reinforce_ada.sampling.strategies import strategy_class


def read_rates_file(path: Path) -> list[float]:
    """JSONL (objects with key `p` or `pass_rate`, or bare numbers) or CSV (column `p` or `pass_rate`)."""
    input_file("--pass-rates-file", path)
    from reinforce_ada.tasks.files import check_size

    check_size(path, "--pass-rates-file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"--pass-rates-file {path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    rates: list[float] = []
    if path.suffix == ".csv":
        try:
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as e:
            raise ConfigError(f"--pass-rates-file {path}: not a readable CSV file ({e})") from None
        for i, row in enumerate(rows, start=2):
            key = "p" if "p" in row else "pass_rate"
            try:
                rates.append(float(row[key]))
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"{path}:{i}: needs a numeric 'p' or 'pass_rate' column, got {row}") from None
        return rates
    for i, line in enumerate(text.split("\n"), start=1):  # "\n" only: U+2028 inside a string is valid JSON
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            rates.append(float(obj if isinstance(obj, int | float) else obj.get("p", obj.get("pass_rate"))))
        except (json.JSONDecodeError, TypeError, ValueError, AttributeError, RecursionError):
            raise ConfigError(f"{path}:{i}: expected a number or an object with key 'p' or 'pass_rate'") from None
    return rates


def cmd_plan(args: argparse.Namespace) -> int:
    from reinforce_ada.simulation.plan import plan, plan_monte_carlo, rows_as_dicts, totals

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
    check_monte_carlo(args.monte_carlo, len(rates), int(strategy_class(cfg.name).cost_hint(cfg.options)))
    rows = plan_monte_carlo(cfg, rates, reps=args.monte_carlo) if args.monte_carlo else plan(cfg, rates)
    if args.json:
        out: Any = rows_as_dicts(rows)
        if args.pass_rates_file:
            out = {"rows": out, "totals": totals(rows)}
        print(json.dumps(out, indent=1))
        return 0
    print(
        f"strategy {cfg.name}  " + " ".join(f"{k}={v}" for k, v in cfg.to_dict().items() if k not in ("name", "seed"))
    )
    print(f"{'p':>8} {'zero_signal':>12} {'expected_samples':>17} {'unresolved':>11}  method")
    for r in rows:
        unres = "-" if r.unresolved is None else f"{r.unresolved:.4f}"
        se = f" ±{abs(r.stderr):.4f}" if r.stderr is not None else ""  # abs: never "±-0.0000"
        print(f"{r.p:8.4f} {r.zero_signal:12.4f} {r.expected_samples:17.2f} {unres:>11}  {r.method}{se}")
    if args.pass_rates_file:
        print("per step:", json.dumps(totals(rows)))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from reinforce_ada.simulation.policy import SimConfig
    from reinforce_ada.simulation.simulate import NOT_A_PREDICTOR, simulate, write_results

    base = strategy_from_args(args)
    arms = [a for a in args.strategies.split(";" if ";" in args.strategies else ",") if a.strip()]
    if not arms:
        raise ConfigError(f"--strategies {args.strategies!r} names no arm; give e.g. 'uniform,seq,est'")
    check_simulate_flags(args, len(arms))
    out = output_file("--out", args.out or free_stem("runs/simulate"), suffixes=(".json", ".png"))  # before the run
    res = simulate(
        arms,
        steps=args.steps,
        seeds=args.seeds,
        batch_size=args.batch_size,
        pool_size=args.pool_size,
        base=base,
        sim=SimConfig(lr=args.sim_lr),
        progress=True,
    )
    res["command"] = "reinforce-ada simulate " + " ".join(sys.argv[2:])
    res["date"] = datetime.date.today().isoformat()
    res["machine"] = (
        f"{platform.machine()} {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"
    )
    js, png = write_results(res, out)
    print(f"{'arm':<40} {'final pass rate':>16} {'no-signal share':>16} {'samples/step':>13}")
    for label, arm in res["arms"].items():
        s = arm["summary"]
        print(f"{label:<40} {s['final_pass_rate']:16.4f} {s['zero_signal_share']:16.3f} {s['samples_per_step']:13.1f}")
    print(f"wrote {js} and {png}")
    print(f"note: {NOT_A_PREDICTOR}", file=sys.stderr)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from reinforce_ada.cpu_load import runs_on_cpu, warn_if_oversubscribed
    from reinforce_ada.training import run_dir as run_folder

    cfg = train_config_from_args(args)  # every flag and the config file checked before torch is imported
    from reinforce_ada.models.load import resolve_device
    from reinforce_ada.training.interrupt import Interrupted
    from reinforce_ada.training.report import make_report, summary_lines
    from reinforce_ada.training.tracking import read_metrics
    from reinforce_ada.training.trainer import Trainer

    if runs_on_cpu(cfg.model.device):  # the default device is auto: the CPU on a machine without CUDA
        threads = warn_if_oversubscribed(cfg.model.threads, explicit=getattr(args, "model.threads") is not None)
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, threads=threads))
    # the run folder's rules live in training.run_dir (the Trainer enforces them too); the CLI reports them early
    cfg = run_folder.fresh_run_dir(cfg, explicit=getattr(args, "run.run_dir") is not None, resume=bool(args.resume))
    resolve_device(cfg.model.device)  # a missing GPU fails now, not after the warm start
    run_dir = Path(cfg.run.run_dir)
    if args.resume:
        run_folder.check_no_links(run_dir)
        run_folder.check_saved_config(run_dir, cfg)
        reached = run_folder.reached_step(run_dir)
        if reached is not None and reached >= cfg.run.steps:
            print(
                f"{run_dir} already reached step {reached} (run.steps={cfg.run.steps}): nothing to do. "
                f"To train further: reinforce-ada train --resume {run_dir} --steps N (N > {reached})"
            )
            return 0
    existed = run_dir.exists()
    try:
        trainer = Trainer(cfg)
        if args.resume and trainer.resume():
            print(f"resumed {cfg.run.run_dir} at step {trainer.step}")
        last = trainer.fit()
    except Interrupted as e:
        print(f"interrupted at step {e.step}; continue with: reinforce-ada train --resume {run_dir}")
        return 130
    except BaseException:
        if not existed:
            _remove_if_empty_run(run_dir)
        raise
    report = make_report(run_dir, title=arm_label(cfg.strategy))
    for line in summary_lines(read_metrics(run_dir)) or [f"final: {json.dumps(last)}"]:
        print(line)
    print(f"wrote {cfg.run.run_dir}/metrics.jsonl, samples.jsonl, config.toml, checkpoints/, tensorboard/ and {report}")
    return 0


def _remove_if_empty_run(run_dir: Path) -> None:
    """A run that failed before its first step leaves no folder behind (it holds no metrics or checkpoints)."""
    import shutil

    if not run_dir.is_dir() or run_dir.is_symlink() or any(p.is_symlink() for p in run_dir.iterdir()):
        return  # never rmtree through a link (run_dir.check_no_links refused it; leave it for the user to see)
    metrics = run_dir / "metrics.jsonl"
    has_steps = metrics.exists() and any('"step": ' in ln and '"step": 0,' not in ln for ln in metrics.open())
    if not has_steps and not any((run_dir / "checkpoints").glob("step_*")):
        shutil.rmtree(run_dir, ignore_errors=True)


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
        with tqdm(
            total=len(prompts), desc=name, unit="prompt", dynamic_ncols=True, file=sys.stderr, disable=None
        ) as bar:
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
    e = eval_setup(args, [args.dataset])
    ds = e.datasets[0]
    verifier = verifiers.build(args.verifier or ds.verifier)
    prompts = apply_template(ds.prompts, e.template, e.tokenizer)
    print(f"{ds.name}: {len(prompts)} prompts x {args.samples} samples from {e.folder}", file=sys.stderr)
    from tqdm.auto import tqdm

    with tqdm(
        total=len(prompts), desc=ds.name, unit="prompt", dynamic_ncols=True, file=sys.stderr, disable=None
    ) as bar:
        correct, errors = sample_correct(e.engine, prompts, verifier, samples=args.samples, progress=bar)
    rates = pass_rates(correct, [p.id for p in prompts])
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for row, rate in zip(ds.rows, rates, strict=True):
            if args.lo < rate <= args.hi:
                fh.write(json.dumps({**row, "pass_rate": rate}, default=str) + "\n")
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
    print(f"wrote {out} and {png}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from reinforce_ada.extras import require
    from reinforce_ada.models.gguf import fetch_smollm2, gguf_to_hf

    out = Path(args.out)
    if (out / "config.json").exists() and not args.force:
        raise ConfigError(f"{out} already holds a model; pass --force to rebuild it")
    require("gguf", f"models {args.name}")  # a missing package fails now, not after the download
    path = gguf_to_hf(Path(args.gguf), out) if args.name == "gguf" else fetch_smollm2(out)
    print(f"wrote {path} (plain fp32 Hugging Face folder); train it with --model.path {path}")
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from reinforce_ada.training.samples_log import main as show

    return show([args.run, "--step", str(args.step), "-n", str(args.n)])
