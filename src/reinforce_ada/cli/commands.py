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
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import (
    check_monte_carlo,
    check_simulate_flags,
    free_stem,
    input_file,
    output_file,
)
from reinforce_ada.cli.flags import strategy_from_args, train_config_from_args
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import arm_label
from reinforce_ada.sampling.options import option_specs
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
    unread = [spec.name for spec in option_specs(type(cfg.options)) if not spec.plan]
    if given := ["--" + k.replace("_", "-") for k in unread if getattr(args, k, None) is not None]:
        them = "them" if len(given) > 1 else "it"
        print(f"note: plan's answer does not depend on {', '.join(given)} (train reads {them})", file=sys.stderr)
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
    specs = args.strategies
    if specs is None and args.name is not None:  # `simulate --strategy X`: X as the flags set it, beside plain GRPO
        specs = ";".join(dict.fromkeys(["uniform", arm_label(base)]))  # (GRPO's defaults, none of X's flags)
        base = None
    specs = "uniform,seq,est" if specs is None else specs
    arms = [a for a in specs.split(";" if ";" in specs else ",") if a.strip()]
    if not arms:
        raise ConfigError(f"--strategies {specs!r} names no arm; give e.g. 'uniform,seq,est'")
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
    written = ["metrics.jsonl", "samples.jsonl", "config.toml", "checkpoints/"]
    written += ["tensorboard/"] if (run_dir / "tensorboard").is_dir() else []  # not with --run.report_to none
    print(f"wrote {cfg.run.run_dir}/{', '.join(written)} and {report}")
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
