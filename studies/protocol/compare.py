"""`reinforce-ada compare` with the study protocol on top: every flag of the package's command, plus

    --preregistration TOML   C0-C3 checked against a committed registration (`protocol.prereg`): a figure it does
                             not name, or whose instrument differs, is marked not pre-registered
    --check-against JSON     an earlier result: whether both runs' goals and headlines agree (`protocol.goals`)
    --fingerprint-of DIR     with --report-only: read the records made by the package source in DIR (another
                             commit's src/reinforce_ada, e.g. a registration's frozen worktree) instead of this one's

and the studies' figures in the result (goals P1-P4 per pool, C0-C3, summary.json's P-entries):

    python -m studies.protocol.compare --arms grpo-n4,seq-bal --pool small --preregistration X.toml --out runs/x
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError

STUDY_FLAGS = ("--preregistration", "--check-against", "--fingerprint-of")


def parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.Namespace]:
    """(the study's flags, the package's compare flags); both parsers exit 2 with a message on bad input."""
    from reinforce_ada.cli.main import build_parser

    ap = argparse.ArgumentParser(prog="python -m studies.protocol.compare", description=__doc__.split("\n")[0])
    ap.add_argument("--preregistration", default=None, metavar="TOML", help="a committed pre-registration")
    ap.add_argument("--check-against", default=None, metavar="JSON", help="an earlier result JSON to agree with")
    ap.add_argument(
        "--fingerprint-of", default=None, metavar="DIR", help="with --report-only: another package's records"
    )
    ours, rest = ap.parse_known_args(argv)
    return ours, build_parser().parse_args(["compare", *rest])


def config(ours: argparse.Namespace, args: argparse.Namespace) -> Any:
    """The package's CompareConfig for the compare flags, with `fingerprint_of` checked and set."""
    from reinforce_ada.bench.jobs import code_fingerprint
    from reinforce_ada.cli.compare import compare_config

    c = compare_config(args)
    if ours.fingerprint_of:
        try:
            code_fingerprint(ours.fingerprint_of)
        except ValueError as e:
            raise ConfigError(f"--fingerprint-of: {e}") from None
        c = dataclasses.replace(c, fingerprint_of=ours.fingerprint_of)
    return c


def run(argv: list[str]) -> int:
    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.bench.report import format_table, write
    from reinforce_ada.cli.checks import read_json_object
    from studies.protocol import prereg
    from studies.protocol.compare_results import study_figures
    from studies.protocol.goals import agreement, format_agreement

    ours, args = parse(argv)
    c = config(ours, args)
    registration = None
    if ours.preregistration:  # a bad file fails before any run, naming the key
        content = prereg.load(ours.preregistration)
        registration = {**prereg.provenance(ours.preregistration), "content": content}
        out_json = Path(c.out).with_suffix(".json")  # a result written over one committed before: its claims then
        registration["first_quoted"] = prereg.first_quoted(ours.preregistration, out_json)
    first = read_json_object("--check-against", ours.check_against) if ours.check_against else None
    results = run_compare(c)
    settings = {**dataclasses.asdict(c), "preregistration": ours.preregistration}
    results["config"] = settings
    study_figures(results, settings, registration)
    if first is not None:
        results["agreement"] = {"with": ours.check_against, "pools": agreement(first, results)}
    command = "python -m studies.protocol.compare " + " ".join(argv)
    js, png = write(results, c.out, command, series=False)
    print(format_table(results))
    if first is not None:
        print(format_agreement(results["agreement"]["pools"]))
    print(f"wrote {js} and {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    sys.exit(main())
