"""`python -m docgen`: regenerate the committed results pages, figures, BENCHMARKS.md and the generated blocks of
README.md and the pages of docs/ (`docgen.blocks`).

python -m docgen                       # write them (seconds; reads the studies' JSON, trains nothing)
python -m docgen --check               # exit 1 naming every file that differs from what would be written
python -m docgen reference --out DIR   # the reference pages the site builds, as files in DIR
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from docgen import architecture, benchmarks, blocks, figures, metrics_page, reference, results, strategies
from docgen.published import PageDataError, unpublishable

ROOT = Path(__file__).resolve().parents[1]


def drawings(pages: list) -> dict:
    """The studies' figures, from their pages: path without suffix -> (data, drawing)."""
    return {stem: fig for p in pages for stem, fig in p.drawings.items()}


def generated() -> dict[str, str]:
    """Every generated text file: repository path -> its text (the figures' data included, not their PNGs)."""
    pages = results.study_pages()
    out = results.pages(pages)
    out["docs/metrics.md"] = metrics_page.page()  # every logged key, defined beside the code that writes it
    filled = blocks.by_name(pages, {**benchmarks.blocks(), "architecture": architecture.architecture()})
    for path, text in out.items():
        if path != "docs/metrics.md":  # its prose says where a metric is nan; a results page publishes none
            unpublishable(path, text.splitlines())
    for name, lines in filled.items():
        unpublishable(f"the generated block {name!r}", lines)
    for path, to_docs in blocks.hand_pages(ROOT).items():
        out[path] = blocks.fill((ROOT / path).read_text(), filled, to_docs)
    with tempfile.TemporaryDirectory() as tmp:
        for path in figures.write(Path(tmp), drawings(pages)):
            if path.suffix == ".json":
                out[path.relative_to(tmp).as_posix()] = path.read_text()
    return out


def stale() -> list[str]:
    """Files whose committed text differs from what `python -m docgen` writes."""
    return [p for p, text in generated().items() if not (ROOT / p).exists() or (ROOT / p).read_text() != text]


def main(argv: list[str] | None = None) -> int:
    from studies.protocol.records import StudyFileError

    try:
        return _main(argv)
    except (PageDataError, StudyFileError) as e:  # a file a page publishes from that is not what its study writes
        print(f"error: {e}", file=sys.stderr)
        return 1


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="python -m docgen", description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", choices=["all", "reference"], default="all")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file is stale")
    ap.add_argument("--out", default=None, help="reference: the folder to write the pages to")
    args = ap.parse_args(argv)
    if args.what == "reference":
        out = Path(args.out or "site-reference")
        for uri, render in {**reference.PAGES, **strategies.pages()}.items():
            (out / uri).parent.mkdir(parents=True, exist_ok=True)
            (out / uri).write_text(render())
            print(f"wrote {out / uri}")
        return 0
    if args.check:
        bad = stale()
        for p in bad:
            print(f"stale: {p} (run `python -m docgen`)", file=sys.stderr)
        return 1 if bad else 0
    for path, text in generated().items():
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        if not (ROOT / path).exists() or (ROOT / path).read_text() != text:
            (ROOT / path).write_text(text)
            print(f"wrote {path}")
    for path in figures.write(ROOT, drawings(results.study_pages())):
        if path.suffix == ".png":
            print(f"drew {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
