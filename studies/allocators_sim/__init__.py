"""Strategies and allocators on the simulated policy (README.md)."""
