"""Importable helpers for tests that go through `module:function` names."""

from __future__ import annotations


def even_length(completion: str, answer: str) -> float:
    """A reward any random policy can earn: completions of even length."""
    return float(len(completion) % 2 == 0)
