"""What `--help` shows: a command's own flags and the common ones; `--help-all` lists every flag.

1) Every subcommand's parser is a `Parser`. A group added with `more_group(title)` is parsed like any other but left
   out of `--help`, which ends with one line naming the groups left out, how many flags they hold and `--help-all`.
2) Nothing is removed from parsing, only from the default help: a flag of a `more` group works as before, a mistyped
   flag is still matched against every flag (`cli.main.parse`), and the generated CLI reference (`docgen`) reads
   the parser's groups, so it lists them all.
"""

from __future__ import annotations

import argparse
import sys


class Parser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose `--help` leaves the groups added by `more_group` to `--help-all`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.more: list[str] = []
        """Titles of the groups `--help` leaves out."""

    def more_group(self, title: str) -> argparse._ArgumentGroup:
        """A flag group listed by `--help-all` only (the first one adds that flag)."""
        if not self.more:
            self.add_argument("--help-all", action=HelpAll, help="list every flag, the groups --help leaves out too")
        self.more.append(title)
        return self.add_argument_group(title)

    def format_help(self, full: bool = False) -> str:
        """argparse's help (usage, description, groups, epilog), without the `more` groups unless `full`."""
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        left_out = []
        for group in self._action_groups:
            if group.title in self.more and not full:
                left_out.append(group)
                continue
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        if left_out:
            flags = sum(1 for g in left_out for a in g._group_actions if a.help is not argparse.SUPPRESS)
            titles = ", ".join(g.title or "" for g in left_out)
            formatter.add_text(f"{flags} more flags ({titles}): {self.prog} --help-all")
        formatter.add_text(self.epilog)
        return formatter.format_help()


class HelpAll(argparse.Action):
    """`--help-all`: print the whole help, every group, and exit."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sys.stdout.write(parser.format_help(full=True))
        parser.exit()
