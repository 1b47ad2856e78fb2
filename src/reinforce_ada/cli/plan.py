"""`reinforce-ada plan`: zero-signal probability, expected samples and unresolved rate per pass rate, in closed form
or by Monte Carlo (`simulation.plan`), for the strategy the flags describe."""

from __future__ import annotations

import argparse
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

FLAG = "--pass-rates-file"


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


RATE_KEYS = ("p", "pass_rate")


def read_rates_file(path: Path) -> list[float]:
    """`--pass-rates-file`: JSONL rows (objects with key `p` or `pass_rate`, or bare numbers), a JSON array of them, or
    CSV (column `p` or `pass_rate`; other columns, as `filter --rates` writes, are ignored), read by the one reader of
    user files (`userfiles.read_rows`: encodings, line separators, size, NUL bytes); each rate is a finite number in
    [0, 1], never a boolean (`userfiles.share`). Every error names the file, the row and the value."""
    from reinforce_ada.userfiles import read_rows, share

    input_file(FLAG, path)
    rates: list[float] = []
    try:
        for i, row in enumerate(read_rows(path, what=FLAG, suffixes=(".jsonl", ".json", ".csv"), bare="p"), 1):
            keys = [k for k in RATE_KEYS if k in row]
            if not keys:
                raise ConfigError(f"{path}: row {i} has no 'p' or 'pass_rate' (it has {sorted(map(str, row))})")
            values = {share(row[k], path, i, k) for k in keys}
            if len(values) > 1:  # both given and different: which one was meant is not ours to guess
                raise ConfigError(f"{path}: row {i} gives p={row['p']!r} and pass_rate={row['pass_rate']!r}")
            rates.append(values.pop())
    except ConfigError as e:  # the reader names the file, the row and the value; the flag is said once, first
        raise ConfigError(str(e) if str(e).startswith(FLAG) else f"{FLAG} {e}") from None
    if not rates:
        raise ConfigError(f"{FLAG} {path}: no pass rates in the file")
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
