"""Running sums: a long-answer task for the embedded testbed, whose answers grow with difficulty.

1) A level is `(terms, digits)`: `terms` numbers of exactly `digits` digits each (a 1-digit term is 0..9, a longer one
   has no leading 0). The prompt is `"<bos>17+25+8+40="`, as the arithmetic task writes it (`tasks.arithmetic`).
2) The canonical answer writes the working before the result, one running sum per `;`-separated step, then the result
   after `#`: `17+25=42;42+8=50;50+40=90;#90`; a model should end it with `"<eos>"`. Its length grows with the level,
   from 8 characters (2 one-digit terms) to about 100 (8 three-digit terms); the char tokenizer makes characters
   tokens. `Prompt.answer` is that whole string (so a teacher-forced pass rate scores the working, `evaluation.exact`)
   and `Prompt.meta` keeps the terms and the total.
3) Two verifiers. `verify` (the task's default, verifier `running_sums`) scores the final result only: the text after
   the completion's `#` must be the total's digits; the working before it is NOT checked, so a right total after
   wrong working scores 1. A completion with no `#` or with more than one scores 0 (several results are a hedge:
   the issue says "after the last #"; we refuse the hedge instead). `verify_strict` (verifier `running_sums_strict`)
   requires the canonical answer exactly: every running sum right, in order, in this format.
4) The held-out set of each level is drawn first, from its own seed, as the arithmetic task does; the training pool
   next, without repeats and without any held-out problem. Levels with more problems than fit in an int64 (900^8)
   are drawn by rejection rather than by `random.sample`.
5) `max_new_tokens(cfg)` leaves wrong answers room to run long: 1.5 x the longest canonical answer (with `<eos>`) of
   the config plus 8.
6) `with_repeats` writes the SFT answers of a warm start whose wrong answers run long: a model that does not stop
   in time. After the last step the last term is sometimes added again, the likelier the longer the sum (the
   working stays consistent, so the total is wrong and the answer longer), and after a repeat sometimes again (a
   loop). Long wrong answers of real models come from many causes; this is one,
   chosen because it keeps the exact pass rate exact: a repeat never yields the canonical string, and it yields the
   right total only when the repeated term is 0 (one-digit levels), which the working gap measures.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from reinforce_ada.tasks.arithmetic import BOS, EOS, count, low, train_counts
from reinforce_ada.types import Prompt

RESULT = "#"
"""Marks the final result: the answer ends `;#{total}`."""
STEP = ";"
"""Ends each step of the working."""
MAX_TERMS, MAX_DIGITS = 12, 6
"""Largest level accepted: the longest canonical answer stays under about 200 characters."""


@dataclass(frozen=True)
class RunningSumsConfig:
    """Which running-sum problems make up the training pool and the held-out set."""

    levels: tuple[tuple[int, int], ...] = ((2, 1), (3, 1), (3, 2), (4, 2), (5, 2), (5, 3), (6, 3), (8, 3))
    """`(terms, digits)` of each level; level `k` (1-based) is `levels[k - 1]`. The canonical answers run from 8
    characters (level 1) to about 100 (level 8)."""
    level_weights: tuple[float, ...] = (0.01, 0.1, 0.15, 0.15, 0.15, 0.15, 0.15, 0.14)
    """Share of the training pool per level (normalised; level 1 has only 100 problems, so it takes 1%)."""
    train_size: int = 4096
    """Prompts in the training pool (split over levels by `level_weights`, largest remainders rounding)."""
    eval_size: int = 256
    """Held-out prompts per level. A level with fewer than `4 * eval_size` distinct problems holds out a quarter."""
    seed: int = 0
    """Seed of the split; the same seed gives the same prompts."""

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("RunningSumsConfig.levels must name at least one level, got ()")
        for pair in self.levels:
            ok = (
                isinstance(pair, tuple | list)
                and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
                and 2 <= pair[0] <= MAX_TERMS
                and 1 <= pair[1] <= MAX_DIGITS
            )
            if not ok:
                raise ValueError(
                    f"RunningSumsConfig.levels entries must be (terms, digits) with 2..{MAX_TERMS} terms and "
                    f"1..{MAX_DIGITS} digits, got {pair!r}"
                )
        if len(self.level_weights) != len(self.levels):
            raise ValueError(
                f"RunningSumsConfig.level_weights needs one weight per level ({len(self.levels)}), "
                f"got {len(self.level_weights)}"
            )
        if any(not w >= 0 for w in self.level_weights) or sum(self.level_weights) <= 0:
            raise ValueError(
                f"RunningSumsConfig.level_weights must be >= 0 with a positive sum, got {self.level_weights}"
            )
        if self.train_size < 1:
            raise ValueError(f"RunningSumsConfig.train_size must be >= 1, got {self.train_size}")
        if self.eval_size < 0:
            raise ValueError(f"RunningSumsConfig.eval_size must be >= 0, got {self.eval_size}")
        if self.seed < 0:
            raise ValueError(f"RunningSumsConfig.seed must be >= 0, got {self.seed}")
        for level, n in enumerate(train_counts(self), start=1):  # type: ignore[arg-type]
            free = capacity(self.levels[level - 1]) - evalcount(self, level)
            if n > free:
                raise ValueError(
                    f"RunningSumsConfig.train_size x level_weights asks for {n} level-{level} prompts "
                    f"{self.levels[level - 1]}, but only {free} distinct ones are left after the held-out set; "
                    f"lower train_size or level_weights[{level - 1}]"
                )


def capacity(level: tuple[int, int]) -> int:
    """Distinct problems of a level `(terms, digits)`."""
    terms, digits = level
    return count(digits) ** terms


def evalcount(cfg: RunningSumsConfig, level: int) -> int:
    """Held-out prompts of `level` (1-based): `eval_size`, or a quarter of a level too small to spare that many."""
    return min(cfg.eval_size, capacity(cfg.levels[level - 1]) // 4)


def canonical(terms: list[int] | tuple[int, ...]) -> str:
    """The canonical answer (without `<eos>`): each running sum as a step, then the total after `#`.

    >>> canonical([17, 25, 8, 40])
    '17+25=42;42+8=50;50+40=90;#90'
    >>> canonical([3, 5])
    '3+5=8;#8'
    """
    steps, total = [], terms[0]
    for t in terms[1:]:
        steps.append(f"{total}+{t}={total + t}")
        total += t
    return STEP.join(steps) + f"{STEP}{RESULT}{total}"


def make_prompt(terms: list[int] | tuple[int, ...], level: int, id: str) -> Prompt:
    """The prompt for `sum(terms)`; `answer` is the canonical working and result, `meta` keeps terms and total."""
    text = f"{BOS}{'+'.join(map(str, terms))}="
    return Prompt(
        id=id, text=text, answer=canonical(terms), level=level, meta={"terms": list(terms), "total": sum(terms)}
    )


def make_split(cfg: RunningSumsConfig) -> tuple[list[Prompt], list[Prompt]]:
    """The training pool (shuffled) and the held-out set (by level), deterministic under `cfg.seed`.

    Ids are `sum-L{level}-{i:06d}` in the pool and `sum-L{level}-eval-{i:06d}` in the held-out set.
    """
    train: list[Prompt] = []
    held_out: list[Prompt] = []
    for level, n_train in enumerate(train_counts(cfg), start=1):  # type: ignore[arg-type]
        shape = cfg.levels[level - 1]
        n_eval = evalcount(cfg, level)
        eval_idx = _sample(shape, n_eval, random.Random(f"running-sums-{cfg.seed}-L{level}-eval"))
        taken = set(eval_idx)
        candidates = _sample(shape, n_train + n_eval, random.Random(f"running-sums-{cfg.seed}-L{level}-train"))
        train_idx = [i for i in candidates if i not in taken][:n_train]
        held_out += [make_prompt(_terms(shape, k), level, f"sum-L{level}-eval-{i:06d}") for i, k in enumerate(eval_idx)]
        train += [make_prompt(_terms(shape, k), level, f"sum-L{level}-{i:06d}") for i, k in enumerate(train_idx)]
    random.Random(f"running-sums-{cfg.seed}-shuffle").shuffle(train)
    return train, held_out


def draw_terms(level: tuple[int, int], rng: random.Random) -> list[int]:
    """One problem of `level` drawn uniformly (the warm start's fresh SFT problems)."""
    terms, digits = level
    return [rng.randrange(low(digits), low(digits) + count(digits)) for _ in range(terms)]


def with_repeats(terms: list[int] | tuple[int, ...], rng: random.Random, rate: float, again: float, limit: int) -> str:
    """An answer that may not stop in time (module doc, 6): after its last step, the last term is added once more
    with chance `rate x (len(terms) - 2)` -- the longer the sum, the likelier -- and after that once more with chance
    `again` (a loop); the total after `#` is the working's. Earlier steps never repeat, so which term comes next is
    still the step's position (repeats there made the tiny model skip terms). Repeats stop before the answer (with
    `<eos>`) would pass `limit` characters. `rate=0` gives `canonical(terms)`.

    >>> with_repeats([17, 25, 8], random.Random(0), 0.0, 0.0, 99) == canonical([17, 25, 8])
    True
    >>> with_repeats([17, 25, 8], random.Random(0), 1.0, 0.0, 99)
    '17+25=42;42+8=50;50+8=58;#58'
    """
    extra, chance = 0, min(rate * (len(terms) - 2), 1.0)
    while rng.random() < chance:
        extra, chance = extra + 1, again
    while len(text := _written(terms, extra)) + 1 > limit and extra:
        extra -= 1
    return text


def _written(terms: list[int] | tuple[int, ...], extra: int) -> str:
    steps, total = [], terms[0]
    for t in [*terms[1:], *[terms[-1]] * extra]:
        steps.append(f"{total}+{t}={total + t}")
        total += t
    return STEP.join(steps) + f"{STEP}{RESULT}{total}"


def result(completion: str) -> str | None:
    """The completion's final result: the text after its one `#`, cut at `<eos>` and stripped; None without
    exactly one `#`.

    >>> result("3+5=8;#8<eos><pad>")
    '8'
    >>> result("3+5=8;#9;#8") is None
    True
    """
    text = completion.split(EOS, 1)[0]
    if text.count(RESULT) != 1:
        return None
    return text.split(RESULT, 1)[1].strip()


def verify(completion: str, answer: str) -> float:
    """1.0 iff the completion's final result (`result`) is the answer's total: the working is not checked.

    `answer` is the canonical answer (its total after `#`) or the bare total.

    >>> verify("17+25=42;42+8=50;50+40=90;#90", "17+25=42;42+8=50;50+40=90;#90")
    1.0
    >>> verify("17+25=41;41+8=50;50+40=90;#90<eos>", "17+25=42;42+8=50;50+40=90;#90")
    1.0
    >>> verify("17+25=42;#42", "17+25=42;42+8=50;50+40=90;#90")
    0.0
    >>> verify("90", "17+25=42;42+8=50;50+40=90;#90")
    0.0
    """
    got = result(completion)
    want = answer.rsplit(RESULT, 1)[-1].strip()
    return 1.0 if got is not None and got.isdigit() and got == want else 0.0


def verify_strict(completion: str, answer: str) -> float:
    """1.0 iff the completion, cut at the first `<eos>` and stripped of whitespace, is the canonical answer: the
    working is checked step by step.

    >>> verify_strict("3+5=8;#8<eos>", "3+5=8;#8")
    1.0
    >>> verify_strict("5+3=8;#8", "3+5=8;#8")
    0.0
    """
    return 1.0 if completion.split(EOS, 1)[0].strip() == answer.strip() else 0.0


def answer_format(answer: str) -> str | None:
    """Why `answer` is not a running-sums answer (None: it is): the verifiers need one `#` and a number after it."""
    if answer.count(RESULT) != 1 or not answer.split(RESULT, 1)[1].strip().isdigit():
        return "it has no '#' followed by the total (e.g. 3+5=8;#8)"
    return None


def longest_answer(level: tuple[int, int]) -> int:
    """Characters of the level's longest canonical answer (all terms at their largest), without `<eos>`."""
    terms, digits = level
    return len(canonical([low(digits) + count(digits) - 1] * terms))


def longest_prompt(level: tuple[int, int]) -> int:
    """Tokens of the level's longest prompt: `<bos>`, the terms, the `+`s and `=`."""
    terms, digits = level
    return 1 + terms * digits + terms


def max_new_tokens(cfg: RunningSumsConfig) -> int:
    """Room for a completion: 1.5 x the longest canonical answer plus `<eos>`, plus 8 (wrong answers run long)."""
    return math.ceil(1.5 * (max(map(longest_answer, cfg.levels)) + 1)) + 8


def _sample(level: tuple[int, int], k: int, rng: random.Random) -> list[int]:
    cap = capacity(level)
    if cap < 2**62:  # random.sample needs len(range) to fit in a C ssize_t
        return rng.sample(range(cap), k)
    seen: dict[int, None] = {}
    while len(seen) < k:  # k << cap: collisions are rare
        seen.setdefault(rng.randrange(cap))
    return list(seen)


def _terms(level: tuple[int, int], index: int) -> list[int]:
    terms, digits = level
    base = count(digits)
    out = []
    for _ in range(terms):
        index, r = divmod(index, base)
        out.append(low(digits) + r)
    return out[::-1]
