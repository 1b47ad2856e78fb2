"""The documentation's generators: what the site shows that code or data already says, written by code.

- `docgen.reference`: the CLI, config-field and strategy-option reference pages, from the parsers and dataclasses
  (rendered when the site is built, by `docgen.hooks`).
- `docgen.results`: one results page per study and the overview, from the studies' committed JSON; BENCHMARKS.md
  (an index of them) and the README's results table. Its parts: `results_meta` (titles, order), `cells` (numbers,
  intervals, verdicts), `sources` (the studies' JSON and records), `page` (one page's layout), `study_pages` (the
  studies without a summary of registered figures).
- `docgen.figures`: the compute-to-target plot and the allocator diagram, from data.

`python -m docgen` writes the committed ones; `python -m docgen --check` says which differ (`tests/test_docs.py`
fails on any). `python -m docgen reference --out DIR` writes the reference pages to DIR for reading without the site.
"""
