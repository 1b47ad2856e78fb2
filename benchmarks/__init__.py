"""This repository's benchmarks: scripts that print a table and write JSON + PNG under `benchmarks/results/`.

Run them from the repository root as modules, e.g. `python -m benchmarks.speed`; `benchmarks.harness` is the
measuring library they share (and `summary.json`'s bookkeeping). Not part of the installed package.
"""
