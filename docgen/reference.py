"""The reference pages, generated from the code each time the site is built (nothing typed twice).

1) `cli_page()`: every subcommand of `reinforce_ada.cli.main.build_parser()`, each flag with its metavar, default and
   help text, grouped as `--help` groups them (the strategy flags are the default strategy's; `strategies_page` has
   every strategy's).
2) `config_page()`: every section dataclass of `TrainConfig` (`[model]`, `[task]`, ...), each field with its type,
   default and the docstring under it (`training.config.field_docs`, the text `--help` prints).
3) `strategies_page()`: every registered strategy's `Options` class: its own options first, then the shared groups
   (`sampling.options.GROUPS`) once, with each strategy's own defaults where they differ from the shared ones.

The site's hook (`docgen/hooks.py`) renders these into `reference/*.md` at build time; `python -m docgen reference
--out DIR` writes them to files for reading without the site. `tests/test_docs.py` checks them against the parsers
and dataclasses.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    s = " ".join(str(text).split())
    s = s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*")


def code(text: Any) -> str:
    """Inline code safe inside a Markdown table cell (a backtick span would show an escaped pipe's backslash)."""
    s = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "<code>" + s.replace("|", "&#124;") + "</code>"


def _default(value: Any) -> str:
    if value is None or value is argparse.SUPPRESS:
        return ""
    if isinstance(value, tuple | list):
        return code(",".join(str(v) for v in value))
    if isinstance(value, str) and value == "":
        return code('""')
    return code(value)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Subcommand name -> (its one-line help, its parser), in the parser's order."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in action._choices_actions}
    return {name: (helps.get(name, ""), sp) for name, sp in action.choices.items()}


def _groups(parser: argparse.ArgumentParser) -> dict[str, list[argparse.Action]]:
    """Visible actions by group title, groups with one title merged, in first-seen order."""
    out: dict[str, list[argparse.Action]] = {}
    for g in parser._action_groups:
        for a in g._group_actions:
            if a.help is argparse.SUPPRESS or isinstance(a, argparse._HelpAction):
                continue
            out.setdefault(g.title or "options", []).append(a)
    return {k: v for k, v in out.items() if v}


def _flag(a: argparse.Action) -> str:
    names = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
    if a.option_strings and a.nargs != 0:
        mv = a.metavar or (
            "{" + ",".join(map(str, a.choices)) + "}" if a.choices and len(a.choices) < 8 else a.dest.upper()
        )
        names += f" {mv}"
    return code(names)


def cli_page() -> str:
    """The CLI reference (module docstring, 1)."""
    from reinforce_ada.cli.flags import DEFAULT_STRATEGY
    from reinforce_ada.cli.main import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "120"
    try:
        parser = build_parser([])
        cmds = subcommands(parser)
        lines = [
            "# Command line",
            "",
            "Generated from `reinforce_ada.cli.main.build_parser()` when the site is built: every subcommand and every "
            "flag, with the help text `--help` prints. The strategy flags shown are those of the default strategy "
            f"(`{DEFAULT_STRATEGY}`); `reinforce-ada COMMAND --strategy NAME --help` lists another strategy's, and "
            "[Strategy options](strategies.md) lists them all.",
            "",
            "| command | what it does |",
            "|---|---|",
            *[f"| [`{n}`](#{n}) | {_cell(h)} |" for n, (h, _) in cmds.items()],
            "",
            "Global flag, allowed anywhere on the line: "
            + "; ".join(f"{_flag(a)}: {_cell(a.help)}" for a in parser._actions if a.dest == "plugin"),
        ]
        for name, (help, sp) in cmds.items():
            lines += ["", f"## {name}", "", _cell(sp.description or help), "", "```text", sp.format_usage().strip()]
            lines += ["```"]
            for title, actions in _groups(sp).items():
                lines += ["", f"**{title}**", "", "| flag | default | help |", "|---|---|---|"]
                for a in actions:
                    lines.append(f"| {_flag(a)} | {_default(a.default)} | {_cell(a.help or '')} |")
        return "\n".join(lines) + "\n"
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def config_sections() -> dict[str, type]:
    """`[section]` -> its dataclass, for every section of `TrainConfig` but `[strategy]` (`strategies_page`)."""
    from reinforce_ada.training.config import SECTIONS

    return {sec: type(factory()) for sec, factory in SECTIONS.items() if sec != "strategy"}


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def config_page() -> str:
    """The config reference (module docstring, 2)."""
    from reinforce_ada.sampling.options import type_name
    from reinforce_ada.training.config import field_docs

    lines = [
        "# Configuration fields",
        "",
        "Generated from the dataclasses of `reinforce_ada.training.config.TrainConfig` when the site is built. Each "
        "field is a TOML key in its `[section]` (presets in `configs/`), a flag `--section.field` of `train`, and "
        "`cfg.section.field` in Python; the text is the docstring under the field, the one `train --help` prints. "
        "The `[strategy]` section holds `name` and that strategy's options: [Strategy options](strategies.md).",
        "",
        "| section | class | fields |",
        "|---|---|---|",
    ]
    secs = config_sections()
    for sec, cls in secs.items():
        lines.append(f"| [`[{sec}]`](#{sec}) | `{cls.__module__}.{cls.__name__}` | {len(dataclasses.fields(cls))} |")
    for sec, cls in secs.items():
        docs = field_docs(cls)
        lines += ["", f"## [{sec}] {{#{sec}}}", ""]
        if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
            lines += [_cell(cls.__doc__), ""]
        lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            lines.append(
                f"| `{f.name}` | {code(type_name(f.type))} | {_default(_field_default(f))} | "
                f"{_cell(docs.get(f.name, ''))} |"
            )
    return "\n".join(lines) + "\n"


def strategy_names() -> list[str]:
    """Every registered strategy but the `auto` alias."""
    from reinforce_ada.sampling.strategies import STRATEGIES

    return [n for n in STRATEGIES if n != "auto"]


def strategies_page() -> str:
    """The per-strategy options reference (module docstring, 3)."""
    from docgen.options import options
    from reinforce_ada.sampling.options import GROUPS, Options
    from reinforce_ada.sampling.strategies import AUTO, strategy_class

    base = {s.name: s for s in options(Options)}
    lines = [
        "# Strategy options",
        "",
        "Generated from each registered strategy's `Options` class when the site is built. One name is one option "
        "everywhere: the `[strategy]` TOML key, the flag (`--k-pos`), the arm spec (`seq:k_pos=2`), "
        "`strategy_config(name, k_pos=2)` in Python, and `AdaGRPOConfig(k_pos=2)` in TRL. An option the chosen "
        "strategy does not have is an error naming the strategies that have it. `reinforce-ada train --strategy NAME "
        f"--help` prints the same list. `auto` is `{AUTO}` (the recommendation when tokens are the bill: "
        "[Which sampler?](../which-sampler.md)).",
        "",
        "| strategy | class | its own options | shared defaults it changes |",
        "|---|---|---|---|",
    ]
    per: dict[str, tuple[list, list]] = {}
    for name in strategy_names():
        cls = strategy_class(name)
        specs = options(cls.Options)
        own = [s for s in specs if s.group == "own"]
        changed = [s for s in specs if s.group != "own" and s.name in base and s.default != base[s.name].default]
        per[name] = (own, changed)
        lines.append(
            f"| [`{name}`](#{name}) | `{cls.__module__}.{cls.__name__}` | {len(own)} | "
            + (", ".join(f"`{s.name}={s.default}`" for s in changed) or "none")
            + " |"
        )
    for name, (own, changed) in per.items():
        cls = strategy_class(name)
        doc = (cls.__module__ and __import__(cls.__module__, fromlist=["_"]).__doc__ or "").strip().split("\n\n")[0]
        lines += ["", f"## {name}", "", _cell(doc), ""]
        if own:
            lines += ["| option | type | default | meaning |", "|---|---|---|---|"]
            lines += [f"| `{s.name}` | {code(s.type)} | {_default(s.default)} | {_cell(s.help)} |" for s in own]
        else:
            lines.append("No options of its own: the shared ones below.")
        if changed:
            lines += ["", "Shared options with this strategy's own default: "]
            lines[-1] += ", ".join(f"`{s.name}` = {_default(s.default)}" for s in changed) + "."
    lines += [
        "",
        "## Shared options {#shared}",
        "",
        "Every strategy has these (`sampling.options.Options`), with the defaults below unless its table above says "
        "otherwise.",
    ]
    titles = {"common": "what counts as correct, group size", **{g: g for g in GROUPS}}
    for group, title in titles.items():
        specs = [s for s in base.values() if s.group == group]
        lines += ["", f"### {title}", "", "| option | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{s.name}` | {code(s.type)} | {_default(s.default)} | {_cell(s.help)} |" for s in specs]
    return "\n".join(lines) + "\n"


PAGES = {"reference/cli.md": cli_page, "reference/config.md": config_page, "reference/strategies.md": strategies_page}
"""Generated at build time: docs path -> the function that writes it."""
