"""Benchmark machinery behind `reinforce-ada compare`: arms, testbed pools, runs, resumable records, curves, the
comparison table, compute to target, the cost model and the report (a top layer: may import any folder, nothing in the
library imports it). This repository's studies build on it from `studies/`, outside the package."""
