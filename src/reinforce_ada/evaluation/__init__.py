"""Held-out evaluation: Ave@k, pass@k, greedy accuracy, per level, several benchmarks with a size-weighted average.

Owns: `metrics` (sampling and scoring through any engine; pure summaries), `datasets` (benchmarks by name),
`loading` (a model folder or LoRA adapter with its engines) and `filter` (the paper's difficulty filter).
May import: `types`, `errors`, `sampling`, `models`, `engines`, `tasks`. The trainer's periodic eval calls it.
"""
