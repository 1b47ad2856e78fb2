"""Held-out evaluation: Ave@k (the paper's metric: mean accuracy over k samples at temperature 1), pass@k with the
unbiased estimator 1 - C(n-c, k)/C(n, k), greedy accuracy, each overall and per difficulty level."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

import numpy as np

from reinforce_ada.rollout import score
from reinforce_ada.types import Prompt, Request


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def evaluate(
    engine: Any,
    prompts: Sequence[Prompt],
    verifier: Callable[[str, str], float],
    *,
    samples: int = 4,
    threshold: float = 0.5,
    greedy_engine: Any | None = None,
) -> dict[str, Any]:
    """Sample `samples` completions per prompt and score them; returns flat metrics (`eval_accuracy`, per level)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    out = engine.generate([Request(p, samples) for p in prompts])
    by_id = {p.id: p for p in prompts}
    errors = score(out, by_id, verifier)
    correct: dict[str, list[float]] = defaultdict(list)
    for s in out:
        correct[s.prompt_id].append(float(s.reward > threshold))  # type: ignore[operator]
    levels: dict[Any, list[str]] = defaultdict(list)
    for p in prompts:
        levels[p.level].append(p.id)
    m: dict[str, Any] = {
        "eval_accuracy": float(np.mean([np.mean(correct[p.id]) for p in prompts])),
        f"eval_pass@{samples}": float(np.mean([pass_at_k(samples, int(sum(correct[p.id])), samples) for p in prompts])),
        "eval_prompts": len(prompts),
        "eval_samples": samples,
        "eval_verifier_errors": errors,
    }
    if len(levels) > 1 or None not in levels:
        for level, ids in sorted(levels.items(), key=lambda kv: str(kv[0])):
            m[f"eval_accuracy_L{level}"] = float(np.mean([np.mean(correct[i]) for i in ids]))
    if greedy_engine is not None:
        g = greedy_engine.generate([Request(p, 1) for p in prompts])
        score(g, by_id, verifier)
        m["eval_greedy_accuracy"] = float(np.mean([s.reward > threshold for s in g]))  # type: ignore[operator]
    return m
