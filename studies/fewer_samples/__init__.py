"""Fewer samples, more prompts: SPO against a reference that varies n and prompts per step (README.md)."""
