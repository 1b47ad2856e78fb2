"""Strategies without a model: a simulated policy, its streaming clock, the planner and side-by-side studies.

Owns: `SimulatedPolicy` (pass rates that move under exact policy-gradient updates; the engine of the statistical
tests), `SimulatedStream` / `RoundEngine` (decode slots and a clock), `plan` (closed forms, exact enumeration,
Monte-Carlo), `simulate` (learning curves) and `makespan` (round vs streaming step time).
For the planner's statistics, tests and the strategies' mechanics, not for choosing a strategy: the simulator does
not predict which allocator wins on real training (`simulate`'s docstring says how it failed to).
May import: `types`, `errors`, `sampling`.
"""
