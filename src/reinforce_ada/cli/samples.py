"""`reinforce-ada samples`: print completions a run saved (`RUN/samples.jsonl`, `training.samples_log`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reinforce_ada.cli.flags import Chosen


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser("samples", help="print completions a run saved (RUN/samples.jsonl)")
    p.add_argument("run", help="run folder")
    p.add_argument("--step", type=int, default=-1, help="step to show (default: the last one logged)")
    p.add_argument("-n", type=int, default=1, help="samples to print (default 1)")
    p.set_defaults(fn=cmd_samples)


def cmd_samples(args: argparse.Namespace) -> int:
    from reinforce_ada.training.samples_log import main as show

    return show([args.run, "--step", str(args.step), "-n", str(args.n)])
