"""reasoning-gym prompts the testbed's tiny model can read: a pool for `reinforce-ada compare` off the addition task.

The shipped tiny model reads 16 characters (`models.tiny.CHARS`: digits, `+-*=`, space, newline) in 64 positions, so
no natural-language question of the family (`tasks.reasoning`) reaches it: every one holds letters, and the
shortest is 51 characters before its answer. What it can read are reasoning-gym's expression generators, written
as its own prompts are: `chain_sum` and `products` as `<bos>4-1-7=`, the answer the package's gold, scored by exact
match (the `arithmetic` verifier every `compare` run
uses; `evaluation.exact` gives each prompt's exact pass rate). This is other arithmetic (subtraction, chains of
terms, products), not general reasoning: the pool tests claims off the addition task the model was warm-started on,
not off arithmetic.

1) `LEVELS`: level -> (dataset, config), ordered by the warm start's exact pass rate (`docs/reasoning_gym.md`).
   `basic_arithmetic` is left out: without parentheses it prints `4 + 0 * 0` for the expression it evaluated as
   `(4 + 0) * 0` (gold 0), so its written question and its gold disagree (reasoning-gym 0.1.25).
2) `make_split(weights, train_size, eval_size, seed)`: training prompts by level weight and `eval_size` held-out
   prompts per level, distinct questions, held-out ones drawn first from their own seeds (`reasoning.draw`'s rule);
   a level with few distinct questions (1-digit products: 100) holds out a quarter of them, as the arithmetic task
   does, so it still has some to train on.
3) `write_pool(folder, ...)` writes `train.jsonl` and `eval.jsonl` (id, prompt, answer, level) for
   `compare --pool NAME=file:path=FOLDER/train.jsonl,eval=FOLDER/eval.jsonl` (a `filter=0-0.375` shapes it like the
   paper's hard set on the model's exact pass rates); `python -m reinforce_ada.tasks.reasoning_pool FOLDER` does it.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.reasoning import MAX_GENERATED, generator_seed, level_counts, require
from reinforce_ada.types import Prompt

BOS, EOS = "<bos>", "<eos>"
LEVELS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("chain_sum", dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1)),
    ("chain_sum", dict(min_terms=2, max_terms=2, min_digits=2, max_digits=2)),
    ("chain_sum", dict(min_terms=3, max_terms=3, min_digits=1, max_digits=1)),
    ("products", dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1)),
    ("chain_sum", dict(min_terms=4, max_terms=4, min_digits=1, max_digits=1)),
    ("chain_sum", dict(min_terms=3, max_terms=3, min_digits=2, max_digits=2)),
    ("products", dict(min_terms=2, max_terms=2, min_digits=2, max_digits=2)),
)
"""Level k (1-based) is `create_dataset(*LEVELS[k - 1])`, written compactly (module doc, 1)."""
WEIGHTS = (1.0,) * len(LEVELS)
"""Equal shares; a `filter` band then keeps the prompts the model solves sometimes."""


def compact(expression: str) -> str:
    """`4 - 1 - 7` -> `<bos>4-1-7=`.

    >>> compact("12 * 3")
    '<bos>12*3='
    """
    return f"{BOS}{expression.replace(' ', '')}="


def _draw(level: int, n: int, seed: int, split: str, skip: set[str]) -> list[Prompt]:
    rg = require()
    name, cfg = LEVELS[level - 1]
    gen = rg.create_dataset(name, seed=generator_seed(seed, f"compact-{name}", level, split), size=2**31 - 1, **cfg)
    out: list[Prompt] = []
    tag = "" if split == "train" else f"{split}-"
    for i in range(max(20 * n, 1000) if n else 0):
        if len(out) >= n:
            break
        e = gen[i]
        text = compact(e["metadata"]["expression"])
        if text in skip:
            continue
        skip.add(text)
        pid = f"rgc-{name}-L{level}-{tag}{len(out):06d}"
        out.append(Prompt(id=pid, text=text, answer=str(e["answer"]), level=level, meta={"dataset": name}))
    return out


def capacity(level: int, draws: int) -> int:
    """Distinct questions among `draws` of a level: its size when that is smaller (1-digit products: 100)."""
    return len({p.text for p in _draw(level, draws, 0, "capacity", set())})


def make_split(
    weights: tuple[float, ...] = WEIGHTS, train_size: int = 4096, eval_size: int = 256, seed: int = 0
) -> tuple[list[Prompt], list[Prompt]]:
    """(training prompts, shuffled; `eval_size` held-out prompts per level with a weight > 0), seeded; at most
    `reasoning.MAX_GENERATED` questions in all (generated one by one: 1e9 ran for days)."""
    if train_size + eval_size * len(LEVELS) > MAX_GENERATED:
        raise ConfigError(
            f"compact reasoning-gym pool: size {train_size} + {len(LEVELS)} levels x {eval_size} held out would "
            f"generate more than {MAX_GENERATED:,} questions one at a time (about 1 ms each); ask for fewer"
        )
    if len(weights) != len(LEVELS) or any(not w >= 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"compact reasoning-gym pool: weights={list(weights)} needs {len(LEVELS)} weights >= 0")
    train: list[Prompt] = []
    held_out: list[Prompt] = []
    for level, n in enumerate(level_counts(weights, train_size), start=1):
        if weights[level - 1] == 0:
            continue
        seen: set[str] = set()
        held_out += _draw(level, min(eval_size, capacity(level, 4 * eval_size) // 4), seed, "eval", seen)
        train += _draw(level, n, seed, "train", seen)
    random.Random(f"reasoning_gym-compact-{seed}-shuffle").shuffle(train)
    return train, held_out


def write_pool(
    folder: str | Path,
    weights: tuple[float, ...] = WEIGHTS,
    train_size: int = 4096,
    eval_size: int = 256,
    seed: int = 0,
) -> tuple[Path, Path]:
    """`folder/train.jsonl` and `folder/eval.jsonl`, the columns `compare`'s file pools read."""
    train, held_out = make_split(weights, train_size, eval_size, seed)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "train.jsonl", out / "eval.jsonl"
    for path, prompts in zip(paths, (train, held_out), strict=True):
        rows = ({"id": p.id, "prompt": p.text, "answer": p.answer, "level": p.level} for p in prompts)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Write the compact reasoning-gym pool for `reinforce-ada compare`.")
    ap.add_argument("folder")
    ap.add_argument("--weights", default="/".join("1" for _ in LEVELS), help="level weights, '/'-separated")
    ap.add_argument("--size", type=int, default=4096, help="training prompts (candidates, before any filter)")
    ap.add_argument("--eval-size", type=int, default=256, help="held-out prompts per level")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    train, held_out = write_pool(a.folder, tuple(float(w) for w in a.weights.split("/")), a.size, a.eval_size, a.seed)
    print(f"wrote {train} and {held_out}; compare --pool 'general=file:path={train},eval={held_out},size={a.size}'")


if __name__ == "__main__":
    main()
