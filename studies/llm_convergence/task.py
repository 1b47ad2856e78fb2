"""The SmolLM2 study's task: `benchmarks.smollm2`'s word problems in the registered level proportions, held-out and
training sets apart, in a folder named by their content (another task is another folder)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path


# -- the task ----------------------------------------------------------------------------------------------------
def level_schedule(levels: dict[int, float], n: int) -> list[int]:
    """n levels in the registered proportions, interleaved (largest deficit first).

    >>> level_schedule({2: 1.0, 4: 3.0}, 8)
    [4, 2, 4, 4, 4, 2, 4, 4]
    """
    total, count = sum(levels.values()), dict.fromkeys(levels, 0)
    out = []
    for i in range(n):
        lv = max(levels, key=lambda k: (levels[k] / total * (i + 1) - count[k], -k))
        count[lv] += 1
        out.append(lv)
    return out


ASKS = ("number", "working")
"""What a registration's `ask` requests after each question: the bare number (`benchmarks.smollm2.SUFFIX`, the
default) or the working, ending with "The answer is <number>." (`benchmarks.smollm2.WORKING`: long answers)."""


def make_task(
    folder: Path, levels: dict[int, float], n_train: int, n_eval: int, ask: str = "number"
) -> tuple[Path, Path]:
    """`benchmarks.smollm2`'s word problems, each followed by the request `ask` names (`ASKS`): held-out first, then
    training questions, distinct and kept apart from the held-out ones while the level has room, in
    `folder/<content hash>/`. Deterministic."""
    from benchmarks.smollm2 import OPS, SUFFIX, WORKING

    if ask not in ASKS:
        raise SystemExit(f"[instrument] ask = {ask!r}; use one of {ASKS}")
    suffix = WORKING if ask == "working" else SUFFIX

    bad = [lv for lv in levels if not 1 <= lv <= len(OPS)]
    if bad:
        raise SystemExit(f"[instrument.levels] {bad}: levels are 1..{len(OPS)} (benchmarks.smollm2.OPS)")
    r, held = random.Random(1), set()
    rows: dict[str, list[dict]] = {"eval": [], "train": []}
    for split, n in (("eval", n_eval), ("train", n_train)):
        seen = set(held)  # training avoids the held-out questions; each split avoids its own repeats
        for i, lv in enumerate(level_schedule(levels, n)):
            for tries in range(250):  # distinct while the level has room (level 1 has 64 questions, level 4 100),
                q, a = OPS[lv - 1](r)  # then repeats, but never of a held-out question while the level has others
                if q not in seen or (tries >= 50 and q not in held):
                    break
            seen.add(q)
            rows[split].append({"id": f"{split}-{i:05d}", "prompt": q + suffix, "answer": str(a), "level": lv})
        held = seen
    texts = {split: "".join(json.dumps(x) + "\n" for x in rows[split]) for split in rows}
    digest = hashlib.sha256((texts["train"] + texts["eval"]).encode()).hexdigest()[:12]
    folder = folder / digest  # another task is another folder: no run can resume onto other data
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in texts.items():
        path = folder / f"{split}.jsonl"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return folder / "train.jsonl", folder / "eval.jsonl"


def cached_model() -> str:
    from benchmarks.smollm2 import cached_model as build

    return str(build())
