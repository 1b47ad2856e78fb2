"""`reinforce-ada` command line: train | eval | filter | compare | models | plan | simulate.

Each command is one module of this folder (`cli/train.py`, `cli/evaluate.py`, ...) that declares its flags beside
its body (`add_parser`); `build_parser` loops over `COMMANDS`. Strategy flags are generated from the chosen
strategy's options class (`--strategy NAME`), so they carry the same names as the config fields
(`--samples-per-round`, `--k-pos`, ...). `--plugin FILE.py` (or a module name, repeatable, anywhere on the line)
imports code that registers strategies, tasks, engines or admission rules before the flags are built. `--help`
shows a command's own flags and the common ones, `--help-all` every flag (`cli.help`). Bad values exit with status
2 and a message naming the flag.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import sys
import warnings

from reinforce_ada.cli import compare, evaluate, features, models, plan, samples, simulate, train
from reinforce_ada.cli import filter as filter_
from reinforce_ada.cli.flags import strategy_in
from reinforce_ada.cli.help import Parser
from reinforce_ada.cli.plugins import PluginInterrupted, load_plugins, split_plugins
from reinforce_ada.errors import ConfigError

COMMANDS = (plan, simulate, train, evaluate, filter_, compare, features, samples, models)
"""The subcommands, in `--help`'s order: each module declares its own flags beside its body, as
`add_parser(sub, strategy)` (the strategy named on the line decides which options the strategy flags list)."""


def build_parser(argv: list[str] | None = None) -> Parser:
    """The parser; `argv` decides which strategy's options the strategy flags and `--help` list (`--strategy`)."""
    chosen = strategy_in(argv)
    p = Parser(prog="reinforce-ada", description=__doc__.splitlines()[0])
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE.py|MODULE",
        help="import this first (repeatable, allowed anywhere on the line): code that registers a strategy, task, "
        "engine or admission rule with one line, e.g. register_strategy('mine', Mine)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub, chosen)
    return p


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parse_args`, except that a flag the command does not know is reported in one line naming the command, the
    closest flags it does know and where the rest are listed."""
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
    known = [o for a in sub._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    hints = []
    for word in extra:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=2, cutoff=0.6) if flag.startswith("-") else []
        hints.append(f"{word} (did you mean {' or '.join(close)}?)" if close else word)
    # one line, not argparse's usage of every flag (train has about 70 lines of them) above it
    sys.stderr.write(f"{sub.prog}: error: unrecognized arguments: {' '.join(hints)} (all flags: {sub.prog} --help)\n")
    raise SystemExit(2)


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one line, as every other message of the command (no source file, line number or code line)."""
    kind = "warning" if category is UserWarning else category.__name__
    return f"reinforce-ada: {kind}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    from reinforce_ada.sampling.strategies import load_strategy_plugins

    argv, plugins = split_plugins(sys.argv[1:] if argv is None else list(argv))
    try:  # what other packages declare (entry points) and --plugin files, before the flags are built
        load_strategy_plugins()
        load_plugins(plugins)
    except ConfigError as e:
        print(f"reinforce-ada: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # one line, not a traceback through importlib
        what = f"--plugin {e.spec}" if isinstance(e, PluginInterrupted) else "the strategy plugins"
        print(f"reinforce-ada: interrupted while importing {what}; the command did not run", file=sys.stderr)
        return 130
    previous, warnings.formatwarning = warnings.formatwarning, one_line_warning
    try:
        return _run(argv, plugins)
    finally:
        warnings.formatwarning = previous  # the command's, not the calling program's


def _run(argv: list[str], plugins: list[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parse(parser, argv)
    try:
        return args.fn(args)
    except ConfigError as e:
        parser.exit(2, f"reinforce-ada {args.command}: error: {e}\n")
    except SystemExit as e:  # commands return their status: this came from code they ran (a plugin's, a callback's)
        if e.code not in (0, None):
            raise
        who = f"code it ran (--plugin {', '.join(plugins)})" if plugins else "code it ran"
        why = f"{who} called sys.exit({e.code}) before it finished; a plugin must raise an error, not exit"
        parser.exit(1, f"reinforce-ada {args.command}: error: the command did not complete: {why}\n")
    except KeyboardInterrupt:
        print(f"\nreinforce-ada {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT):
            why = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only"}.get(
                e.errno, "permission denied"
            )
            parser.exit(1, f"reinforce-ada {args.command}: error: {why}: {e.filename or e}\n")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
