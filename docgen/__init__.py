"""The documentation's generators: what the site shows that code or data already says, written by code.

- `docgen.reference`: the CLI, config-field and strategy-option reference pages, from the parsers and dataclasses,
  and `docgen.strategies`: one page per registered strategy (its docstring, options and results), both rendered when
  the site is built (`docgen.hooks`); `docgen.options` is the one reader of an options class.
- `docgen.results`: one results page per study and the overview, from the studies' committed JSON, and BENCHMARKS.md
  (an index of them). Each study writes its own page: `studies/<name>/page.py` exposes `page() -> Page`
  (`docgen.page`: the page, what it adds to the overview, its blocks of hand-written pages, its figures), and
  `results.study_pages` finds them all; nothing here names a study. The parts a study's page uses: `summary` (the
  page of a study with a `summary.json` of registered figures), `cells` (numbers, intervals, verdicts), `sources`
  (the studies' JSON and records).
- `docgen.blocks`: the generated blocks of README.md and docs/ pages (between `<!-- NAME: generated ... -->`
  markers), filled from the studies' pages, the benchmarks' results (`docgen.benchmarks`) and the package's layout
  (`docgen.architecture`: docs/architecture.md's folder map).
- `docgen.figures`: the figures the studies' pages draw, and the allocator diagram, from data.
- `docgen.published`: the one door every published value comes through (numbers finite and bounded, a missing field
  named with its file, text safe for Markdown and HTML), and `docgen.schema`: the shape a page declares for what it
  publishes (a summary figure with its value or pools, a claim with its pools), checked before it is written.

`python -m docgen` writes the committed ones; `python -m docgen --check` says which differ (`tests/test_docs.py`
fails on any). `python -m docgen reference --out DIR` writes the reference pages to DIR for reading without the site.
"""
