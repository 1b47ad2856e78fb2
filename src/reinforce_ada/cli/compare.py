"""`reinforce-ada compare`: the command body (the machinery is `reinforce_ada.bench`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.cli.checks import finite, read_lrs
from reinforce_ada.errors import ConfigError


def compare_config(args: argparse.Namespace) -> Any:
    """The `bench.compare.CompareConfig` the parsed `compare` flags describe (every check done here)."""
    from reinforce_ada.bench.arms import ARMS, split_arms
    from reinforce_ada.bench.compare import QUICK, CompareConfig

    out = args.out or ("runs/compare-quick/convergence" if args.quick else "runs/compare/convergence")
    fixed = read_lrs(args.lrs_from) if args.lrs_from else {}
    for item in args.lr:
        arm, eq, lr = item.partition("=")
        try:
            fixed[arm.strip()] = float(lr)
        except ValueError:
            raise ConfigError(f"--lr {item!r}: write ARM=LR, e.g. seq-bal=4e-4") from None
        if not eq:
            raise ConfigError(f"--lr {item!r}: write ARM=LR, e.g. seq-bal=4e-4")
        finite(f"--lr {item}:", fixed[arm.strip()], least=0.0)
    arms = tuple(split_arms(args.arms)) if args.arms else tuple(ARMS)
    names = {a.partition("=")[0].strip() for a in arms}
    fields: dict[str, Any] = {"arms": arms, "out": out, "workers": args.workers, "seed_offset": args.seed_offset}
    fields["run_root"] = str(Path(out).parent)  # pools, run folders and records beside the result, not in the cwd
    fields["fixed_lrs"] = tuple((k, v) for k, v in fixed.items() if k in names)
    if args.pool:
        fields["pools"] = tuple(args.pool)
    if args.lrs:
        try:
            fields["lrs"] = tuple(float(x) for x in args.lrs.split(","))
        except ValueError:
            raise ConfigError(f"--lrs {args.lrs!r}: give comma-separated numbers, e.g. 2e-4,4e-4,8e-4") from None
        for lr in fields["lrs"]:
            finite(f"--lrs {args.lrs}: each", lr, least=0.0)
    if args.quick:
        fields.update(QUICK)
    if args.sweep_each_pool:
        fields["sweep_each_pool"] = True
    if args.long_arms:
        fields["long_arms"] = tuple(split_arms(args.long_arms))
    if args.report_only:
        fields["only_cached"] = True
    for name in ("extend_sweep", "records"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    for name in ("steps", "batch_size", "seeds", "other_seeds", "sweep_seeds", "token_budget", "eval_points"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    c = CompareConfig(**fields)
    return dataclasses.replace(c, compute_arm=headline_arm(c, [a.partition("=")[0].strip() for a in arms], args))


def headline_arm(c: Any, names: list[str], args: argparse.Namespace) -> str:
    """The arm whose compute-to-target figures lead the report: `--compute-arm` (one of the arms), else the default
    when it runs, else the first adaptive arm (else the default, reported as absent). Adaptive is read from the parsed
    spec: not plain uniform sampling (learner settings aside) and not an oracle."""
    from reinforce_ada.bench.arms import resolve_arms

    if args.compute_arm is not None:
        if args.compute_arm not in names:
            raise ConfigError(f"--compute-arm {args.compute_arm}: not one of the arms run ({', '.join(names)})")
        return args.compute_arm
    if c.compute_arm in names:
        return c.compute_arm

    def adaptive(cfg: Any) -> bool:
        o = cfg.options
        plain = cfg.name == "uniform" and getattr(o, "select", "none") == "none"
        return not plain and getattr(o, "estimator", None) != "oracle"

    arms = {a.name: a.cfg for a in resolve_arms(list(c.arms))[0]}
    return next((n for n in names if n in arms and n not in c.oracles and adaptive(arms[n])), c.compute_arm)


def cmd_compare(args: argparse.Namespace) -> int:
    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.bench.report import format_table, write

    c = compare_config(args)
    command = "reinforce-ada compare " + " ".join(sys.argv[2:])
    results = run_compare(c)
    js, png = write(results, c.out, command, series=False)  # full per-step series stay in the records
    print(format_table(results))
    print(f"wrote {js} and {png}")
    return 0
