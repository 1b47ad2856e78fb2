"""The results pages, generated from the studies' committed JSON (`python -m docgen`): no number is typed by hand.

One page per study (`docs/results/<study>.md`) in one format (`docgen.page.Page`): the verdict in one line, the result
with its interval per registered figure, a table of checks, the figures with the command that regenerates each, and
the provenance of every result (date, code commit, machine, command, runs, cost in CPU-hours where the records carry
run seconds). Each study writes its own page: `studies/<name>/page.py` exposes `page() -> Page` (a study with a
`summary.json` of registered figures uses `docgen.summary.summary_page`), and `study_pages` finds every such module,
so a new study needs no edit here. `docs/results/index.md` adds what the studies' pages put in their `overview` (the
cross-study answer to "does adaptive sampling pay?") above the table of studies; BENCHMARKS.md is an index of them.
"""

from __future__ import annotations

import importlib

from docgen import sources
from docgen.cells import cell, code, verdict, with_interval
from docgen.page import GENERATED as _GENERATED
from docgen.page import Page
from docgen.published import PageDataError
from docgen.sources import ROOT, STUDIES, read_json

GENERATED = _GENERATED.format(source="docgen/results.py")


def study_pages() -> list[Page]:
    """Every study's page (`studies/<name>/page.py`: `page() -> Page`), in their `order`. A page that cannot be
    built from its files is a `PageDataError` naming them: the field where the reader knows it
    (`docgen.published`), else the files the page read and what went wrong."""
    return sorted(map(study_page, sorted(p.parent.name for p in STUDIES.glob("*/page.py"))), key=lambda p: p.order)


def study_page(name: str) -> Page:
    from studies.protocol.records import StudyFileError

    sources.reading.clear()
    try:
        return importlib.import_module(f"studies.{name}.page").page()
    except (PageDataError, StudyFileError):
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        files = ", ".join(dict.fromkeys(sources.reading)) or "no file"
        raise PageDataError(
            f"studies/{name}/page.py cannot build its page from {files}: a field of another type or shape than the "
            f"study writes ({type(e).__name__}: {e}); regenerate the study's results or restore them from git"
        ) from e


def index_page(pages: list[Page]) -> str:
    lines = [
        GENERATED,
        "",
        "# Results",
        "",
        "What the library's strategies buy, measured. Every number on these pages is generated from the studies' "
        "committed JSON by `python -m docgen`, and a test fails when a committed page differs from what that command "
        "writes. Each study lives in `studies/<name>/` with its registration, analysis, records and write-up.",
        "",
        *[line for p in pages if p.overview for line in (*p.overview, "")],
        "## Studies {#studies}",
        "",
        "| study | verdict | last updated |",
        "|---|---|---|",
    ]
    for p in pages:
        lines.append(f"| [{p.title}]({p.study}.md) | {cell(p.verdict)} | {p.updated or 'running'} |")
    lines += [
        "",
        "Speed and engine benchmarks (one machine, one thing timed each): [Speed and engines](speed.md).",
    ]
    return "\n".join(lines) + "\n"


def speed_page() -> str:
    """The speed and engine goals (`benchmarks/results/summary.json`), each with its command and date."""
    summary = read_json(ROOT / "benchmarks" / "results" / "summary.json")
    lines = [
        GENERATED,
        "",
        "# Speed and engine benchmarks",
        "",
        "Each benchmark times one thing on one machine (`python -m benchmarks.NAME`, results under "
        "`benchmarks/results/` with the command, machine and date of each); the write-up with the conditions of "
        "every measurement is [Speed and engines: notes](../benchmarks.md).",
        "",
        "| goal | what | measured | target | verdict | command | date |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, e in summary.items():
        if not isinstance(e, dict) or e.get("value") is None:
            continue
        lines.append(
            f"| {key} | {cell(e.get('what', ''))} | {with_interval(e)} | {cell(e.get('goal', ''))} | "
            f"{verdict(e, e.get('goal'))} | {code(e.get('command', ''))} | {e.get('date', '')} |"
        )
    return "\n".join(lines) + "\n"


def benchmarks_index(pages: list[Page]) -> str:
    """BENCHMARKS.md: an index of the results pages."""
    lines = [
        GENERATED,
        "",
        "# Benchmarks and studies",
        "",
        "The results live on the documentation site's Results pages (`mkdocs serve`, or the Markdown under "
        "`docs/results/`), generated from the studies' JSON by `python -m docgen`:",
        "",
        "| page | verdict |",
        "|---|---|",
    ]
    for p in pages:
        lines.append(f"| [{p.title}](docs/results/{p.study}.md) | {cell(p.verdict)} |")
    lines += [
        "| [Speed and engine benchmarks](docs/results/speed.md) | the goals P4-P8 with their commands and dates; notes "
        "in [docs/benchmarks.md](docs/benchmarks.md) |",
    ]
    return "\n".join(lines) + "\n"


def pages(studies: list[Page]) -> dict[str, str]:
    """Every generated results file, from the studies' pages: repository path -> text."""
    out = {f"docs/results/{p.study}.md": p.render() for p in studies}
    out["docs/results/index.md"] = index_page(studies)
    out["docs/results/speed.md"] = speed_page()
    out["BENCHMARKS.md"] = benchmarks_index(studies)
    return out
