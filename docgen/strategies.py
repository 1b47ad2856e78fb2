"""One page per registered strategy (`strategies/<name>.md`), rendered when the site is built (`docgen.hooks`), as
the reference pages are: the strategy module's docstring (the paper and where we depart from it), how to run it, its
options table (`docgen.options`, the one reader of an options class) and, where a study ran it, its row of results
(the studies' pages' `by_strategy`, generated from their committed JSON). A strategy registered tomorrow gets its page
and its place in the nav with no edit here.
"""

from __future__ import annotations

import importlib
import inspect
import re

from docgen.blocks import relink
from docgen.options import options
from docgen.reference import _cell, _default, code, strategy_names


def markdown(doc: str) -> list[str]:
    """A module docstring as Markdown: its numbered prose ("1) ...") and dashes as lists, a blank line where a list
    starts or ends (continuation lines stay indented under their item)."""
    out: list[str] = []
    in_list = False
    for line in doc.splitlines():
        item = re.match(r"(\d+)\) (.*)", line)
        starts = bool(item) or line.startswith("- ")
        if item:
            line = f"{item.group(1)}. {item.group(2)}"
        if out and out[-1] and ((starts and not in_list) or (in_list and not starts and not line.startswith(" "))):
            out.append("")
        in_list = starts or (in_list and line.startswith(" "))
        out.append(line)
    return out


def page(name: str, results: list[list[str]]) -> str:
    from reinforce_ada.sampling.options import Options
    from reinforce_ada.sampling.strategies import strategy_class

    cls = strategy_class(name)
    doc = inspect.getdoc(importlib.import_module(cls.__module__)) or ""
    first, _, rest = doc.partition("\n")
    base = {s.name: s for s in options(Options)}
    specs = options(cls.Options)
    own = [s for s in specs if s.group == "own"]
    changed = [s for s in specs if s.group != "own" and s.name in base and s.default != base[s.name].default]
    lines = [f"# `{name}`: {first.rstrip('.')}", "", *markdown(rest.strip()), "", "## Run it", "", "```bash"]
    lines += [
        f"reinforce-ada train --strategy {name}                 # train with it",
        f"reinforce-ada train --strategy {name} --help          # its options, as flags",
        f"reinforce-ada plan --strategy {name} --pass-rates 0.1,0.5,0.9   # its cost and signal per pass rate",
        "```",
        "",
        f'In Python `strategy_config("{name}", OPTION=VALUE)`, in TRL `AdaGRPOConfig(strategy="{name}", ...)`, as an '
        f"arm of `reinforce-ada compare` the spec `{name}:OPTION=VALUE`. Class: `{cls.__module__}.{cls.__name__}`.",
        "",
        "## Options",
        "",
    ]
    if own:
        lines += ["| option | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{s.name}` | {code(s.type)} | {_default(s.default)} | {_cell(s.help)} |" for s in own]
    else:
        lines.append("No options of its own.")
    if changed:
        lines += ["", "Shared options this strategy sets its own way: "]
        lines[-1] += ", ".join(f"`{s.name}` = {_default(s.default)}" for s in changed) + "."
    lines += ["", "Every strategy also has the shared options: [Strategy options](../reference/strategies.md#shared)."]
    lines += ["", "## Results", ""]
    if results:
        for part in results:
            lines += [*part, ""]
    else:
        lines.append("No study has run it yet: `reinforce-ada compare` measures it on a pool like yours.")
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[str, callable]:
    """Site path -> the function that renders it, one page per registered strategy (`auto` is `AUTO`'s page)."""
    cache: dict[str, dict[str, list[list[str]]]] = {}

    def results() -> dict[str, list[list[str]]]:
        if not cache:
            from docgen.results import study_pages

            cache["by"] = {}
            for p in study_pages():
                for name, lines in p.by_strategy.items():
                    cache["by"].setdefault(name, []).append(relink(lines, "../"))
        return cache["by"]

    return {f"strategies/{n}.md": (lambda n=n: page(n, results().get(n, []))) for n in strategy_names()}


def nav() -> list[dict[str, str]]:
    """The nav entries of the strategy pages, in the registry's order."""
    return [{n: f"strategies/{n}.md"} for n in strategy_names()]
