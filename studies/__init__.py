"""This repository's studies: each folder one study (its scripts, registrations, analysis, write-up, results and
tests), with the protocol they share in `protocol/`. Run from the repository root as modules
(`python -m studies.NAME.regenerate`). Studies import the package, `benchmarks.harness` and `benchmarks.smollm2`
(the measuring library and the SmolLM2 workload); nothing in the package or in `benchmarks/` imports a study."""
