"""Convergence side by side and every allocator on the testbed: the goals P1-P4 (README.md)."""
