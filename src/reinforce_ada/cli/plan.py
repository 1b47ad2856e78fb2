"""`reinforce-ada plan`: zero-signal probability, expected samples and unresolved rate per pass rate, in closed form
or by Monte Carlo (`simulation.plan`), for the strategy the flags describe."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import check_monte_carlo, input_file
from reinforce_ada.cli.flags import Chosen, add_strategy_flags, strategy_from_args
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import user_set
from reinforce_ada.sampling.options import option_specs
from reinforce_ada.sampling.strategies import strategy_class


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser(
        "plan",
        help="zero-signal probability, expected samples and unresolved rate per pass rate",
        usage="%(prog)s (--pass-rates P,P,... | --pass-rates-file FILE) [--strategy NAME] [--OPTION VALUE ...]",
    )
    p.add_argument("--pass-rates", help="comma-separated pass rates, e.g. 0.05,0.1,0.5")
    p.add_argument("--pass-rates-file", help="JSONL or CSV of pass rates (one step's batch); prints per-step totals")
    p.add_argument("--monte-carlo", type=int, default=0, metavar="REPS", help="estimate by simulation instead")
    p.add_argument("--json", action="store_true", help="print JSON: a list of {p, zero_signal, expected_samples, ...}")
    add_strategy_flags(p, strategy, plan_only=True)
    p.set_defaults(fn=cmd_plan)


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


def pass_rates(args: argparse.Namespace) -> list[float]:
    """The rates of `--pass-rates-file` or `--pass-rates` (one of them is required)."""
    if args.pass_rates_file:
        return read_rates_file(Path(args.pass_rates_file))
    if args.pass_rates:
        try:
            return [float(x) for x in args.pass_rates.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--pass-rates must be comma-separated numbers, got {args.pass_rates!r}") from None
    raise ConfigError("give --pass-rates 0.05,0.1,0.5 or --pass-rates-file FILE")


def header(cfg: Any) -> str:
    """`strategy NAME` and the options that differ from its defaults (the rest are the strategy's own defaults)."""
    changed = user_set(cfg)
    said = " ".join(f"{k}={v}" for k, v in changed.items()) if changed else "(its default options)"
    return f"strategy {cfg.name}  {said}"


def cmd_plan(args: argparse.Namespace) -> int:
    from reinforce_ada.simulation.plan import plan, plan_monte_carlo, rows_as_dicts, totals

    cfg = strategy_from_args(args)
    unread = [spec.name for spec in option_specs(type(cfg.options)) if not spec.plan]
    if given := ["--" + k.replace("_", "-") for k in unread if getattr(args, k, None) is not None]:
        them = "them" if len(given) > 1 else "it"
        print(f"note: plan's answer does not depend on {', '.join(given)} (train reads {them})", file=sys.stderr)
    rates = pass_rates(args)
    check_monte_carlo(args.monte_carlo, len(rates), int(strategy_class(cfg.name).cost_hint(cfg.options)))
    rows = plan_monte_carlo(cfg, rates, reps=args.monte_carlo) if args.monte_carlo else plan(cfg, rates)
    if args.json:
        out: Any = rows_as_dicts(rows)
        if args.pass_rates_file:
            out = {"rows": out, "totals": totals(rows)}
        print(json.dumps(out, indent=1))
        return 0
    print(header(cfg))
    print(f"{'p':>8} {'zero_signal':>12} {'expected_samples':>17} {'unresolved':>11}  method")
    for r in rows:
        unres = "-" if r.unresolved is None else f"{r.unresolved:.4f}"
        se = f" ±{abs(r.stderr):.4f}" if r.stderr is not None else ""  # abs: never "±-0.0000"
        print(f"{r.p:8.4f} {r.zero_signal:12.4f} {r.expected_samples:17.2f} {unres:>11}  {r.method}{se}")
    if args.pass_rates_file:
        print("per step:", json.dumps(totals(rows)))
    return 0
