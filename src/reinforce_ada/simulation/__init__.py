"""Strategies without a model: a simulated policy, its streaming clock, the planner and side-by-side studies.

Owns: `SimulatedPolicy` (pass rates that move under exact policy-gradient updates; the engine of the statistical
tests), `SimulatedStream` / `RoundEngine` (decode slots and a clock), `plan` (closed forms, exact enumeration,
Monte-Carlo), `simulate` (learning curves) and `makespan` (round vs streaming step time).
May import: `types`, `errors`, `sampling`.
"""
