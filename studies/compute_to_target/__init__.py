"""Compute to target: every arm against the best uniform GRPO, with the oracle's ceiling (README.md)."""
