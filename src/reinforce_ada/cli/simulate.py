"""`reinforce-ada simulate`: strategies' mechanics on the simulated policy (`simulation.simulate`), written as
learning curves (JSON + PNG). Not a predictor of which strategy wins on a real model."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

from reinforce_ada.cli.checks import check_simulate_flags, free_stem, output_file
from reinforce_ada.cli.flags import Chosen, add_strategy_flags, strategy_from_args
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import arm_label, parse_arm
from reinforce_ada.sampling.strategies import strategy_class


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    from reinforce_ada.simulation.simulate import NOT_A_PREDICTOR

    p = sub.add_parser(
        "simulate",
        help="run strategies' mechanics on the simulated policy (not a predictor of which wins); write curves",
        description=f"Learning curves (JSON + PNG) of strategies on a simulated policy. Note: {NOT_A_PREDICTOR}.",
        usage="%(prog)s [--strategies ARMS | --strategy NAME [--OPTION VALUE ...]] [--steps N] [--seeds N] [...]",
    )
    p.add_argument(
        "--strategies",
        default=None,
        help="comma-separated arms; options after a colon, arms separated by ';' then, e.g. "
        "'uniform;uniform:n=8;seq:exit=positive' (default: uniform beside --strategy's strategy when it is given, "
        "else 'uniform,seq,est')",
    )
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="prompts per step")
    p.add_argument("--pool-size", type=int, default=2000, help="prompts in the simulated hard pool")
    p.add_argument("--sim-lr", type=float, default=0.3, help="simulated policy's step size on the logits")
    p.add_argument(
        "--out",
        default=None,
        help="output path without suffix (.json and .png); default runs/simulate, or runs/simulate-N when that is "
        "taken (an earlier run's results are never overwritten unless --out names them)",
    )
    add_strategy_flags(p, strategy)
    p.set_defaults(fn=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from reinforce_ada.simulation.policy import SimConfig
    from reinforce_ada.simulation.simulate import NOT_A_PREDICTOR, simulate, write_results
    from reinforce_ada.training.bounds import check_step_draws

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
    for arm in arms:  # each arm's step draws fit memory (`training.bounds`): uniform:n=10**12 was a MemoryError
        cfg = parse_arm(arm, base)
        try:
            check_step_draws(strategy_class(cfg.name), cfg.options, args.batch_size, 0, batch_flag="--batch-size")
        except ConfigError as e:
            raise ConfigError(f"--strategies arm {arm.strip()!r}: {e}") from None
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
