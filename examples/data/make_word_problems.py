"""Write the small word-problem files docs/own-data.md trains on (seeded; run to regenerate).

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


def rows(n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    """`n` distinct questions (none of them in `exclude`: the held-out file shares no question with the training
    file, and neither repeats a row, so loading them warns of no duplicates)."""
    rng = random.Random(seed)
    out, seen = [], set(exclude)
    i = 0
    while len(out) < n:
        text, fn = TEMPLATES[i % len(TEMPLATES)]
        i += 1
        a, b = rng.randint(2, 20), rng.randint(1, 9)
        if fn(a, b) < 0:
            a, b = b, a
        question = text.format(a=a, b=b)
        if question in seen:
            continue
        seen.add(question)
        out.append({"question": question, "gold": str(fn(a, b))})
    return out


if __name__ == "__main__":
    here = Path(__file__).parent
    train = rows(200, 0)
    for name, data in (
        ("word_problems.jsonl", train),
        ("word_problems_eval.jsonl", rows(60, 1, {r["question"] for r in train})),
    ):
        (here / name).write_text("".join(json.dumps(r) + "\n" for r in data))
        print(f"wrote {here / name} ({len(data)} rows)")
