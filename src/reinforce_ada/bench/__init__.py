"""Benchmark machinery behind `reinforce-ada compare` and the scripts in `benchmarks/` (a top layer: may import any
folder, nothing in the library imports it)."""
