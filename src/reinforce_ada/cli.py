"""`reinforce-ada` command line: plan | simulate | train | eval.

Strategy flags are generated from `StrategyConfig`, so they carry the same names as the config fields
(`--samples-per-round`, `--k-pos`, ...). Bad values exit with status 2 and a message naming the flag.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import csv
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from reinforce_ada.config import STRATEGY_NAMES, StrategyConfig
from reinforce_ada.errors import ConfigError
from reinforce_ada.simulate import coerce


def add_strategy_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("strategy options (same names as the config fields)")
    g.add_argument("--strategy", dest="name", default=None, help=f"one of {', '.join(STRATEGY_NAMES)} (default seq)")
    for f in fields(StrategyConfig):
        if f.name == "name":
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
