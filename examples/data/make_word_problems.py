"""Write the small word-problem files the README's own-data walk-through trains on (seeded; run to regenerate).

    python examples/data/make_word_problems.py

Columns are deliberately not `prompt`/`answer` (`question`, `gold`), as a file of your own would have.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TEMPLATES = [
    ("{a} apples are in a basket and {b} more are added. How many apples are in the basket?", lambda a, b: a + b),
    ("A shelf holds {a} books. {b} are taken away. How many books are left?", lambda a, b: a - b),
    ("There are {a} rows of {b} chairs. How many chairs are there?", lambda a, b: a * b),
    ("Tom has {a} coins and finds {b} more. How many coins does Tom have now?", lambda a, b: a + b),
    ("A bus carries {a} people and {b} get off. How many people stay on the bus?", lambda a, b: a - b),
]


def rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text, fn = TEMPLATES[i % len(TEMPLATES)]
        a, b = rng.randint(2, 20), rng.randint(1, 9)
        if fn(a, b) < 0:
            a, b = b, a
        out.append({"question": text.format(a=a, b=b), "gold": str(fn(a, b))})
    return out


if __name__ == "__main__":
    here = Path(__file__).parent
    for name, n, seed in (("word_problems.jsonl", 200, 0), ("word_problems_eval.jsonl", 60, 1)):
        (here / name).write_text("".join(json.dumps(r) + "\n" for r in rows(n, seed)))
        print(f"wrote {here / name} ({n} rows)")
