"""Synthetic addition with graded difficulty: the built-in task of the CPU testbed.

1) A level is a pair of operand lengths in digits, `(3, 4)` meaning a 3-digit plus a 4-digit number. The answer is
   written most significant digit first, so a carry must be foreseen before it is written: longer operands are
   harder, and mixed lengths fall between two equal-length levels. That fills the range of pass rates (about
   0.02–0.2) where fixed-n GRPO with 4 samples mostly draws all-wrong groups and Reinforce-Ada should help most.
2) The held-out set of each level is drawn first, from its own seed, so it does not change when the training pool's
   size or mix does. The training pool is drawn next, without repeats and without any held-out problem.
3) The prompt is `"<bos>{a}+{b}="` (the tokenizer in `models.tiny` adds nothing itself) and the answer is the
   sum's decimal digits; a model should end it with `"<eos>"`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from reinforce_ada.types import Prompt

BOS = "<bos>"
EOS = "<eos>"


@dataclass(frozen=True)
class ArithmeticConfig:
    """Which addition problems make up the training pool and the held-out set."""

    levels: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (3, 3), (3, 4), (4, 4), (4, 5), (5, 5))
    """Operand lengths `(digits of a, digits of b)` of each level; level `k` (1-based) is `levels[k - 1]`."""
    level_weights: tuple[float, ...] = (0.01, 0.03, 0.06, 0.1, 0.3, 0.3, 0.2)
    """Share of the training pool per level (normalised to sum to 1; zero leaves a level out of the pool)."""
    train_size: int = 4096
    """Prompts in the training pool (split over levels by `level_weights`, largest remainders rounding)."""
    eval_size: int = 256
    """Held-out prompts per level. A level with fewer than `4 * eval_size` distinct problems holds out a quarter."""
    seed: int = 0
    """Seed of the split; the same seed gives the same prompts."""

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("ArithmeticConfig.levels must name at least one level, got ()")
        for pair in self.levels:
            if len(pair) != 2 or not all(isinstance(d, int) and 1 <= d <= 18 for d in pair):
                raise ValueError(
                    f"ArithmeticConfig.levels entries must be (digits, digits) with 1..18 digits, got {pair}"
                )
        if len(self.level_weights) != len(self.levels):
            raise ValueError(
                f"ArithmeticConfig.level_weights needs one weight per level ({len(self.levels)}), "
                f"got {len(self.level_weights)}"
            )
        if any(not w >= 0 for w in self.level_weights) or sum(self.level_weights) <= 0:
            raise ValueError(
                f"ArithmeticConfig.level_weights must be >= 0 with a positive sum, got {self.level_weights}"
            )
        if self.train_size < 1:
            raise ValueError(f"ArithmeticConfig.train_size must be >= 1, got {self.train_size}")
        if self.eval_size < 0:
            raise ValueError(f"ArithmeticConfig.eval_size must be >= 0, got {self.eval_size}")
        for level, (n, cap) in enumerate(zip(train_counts(self), map(capacity, self.levels), strict=True), start=1):
            free = cap - evalcount(self, level)
            if n > free:
                raise ValueError(
                    f"ArithmeticConfig.train_size x level_weights asks for {n} level-{level} prompts "
                    f"{self.levels[level - 1]}, but only {free} distinct ones are left after the held-out set; "
                    f"lower train_size or level_weights[{level - 1}]"
                )


def capacity(digits: tuple[int, int]) -> int:
    """Distinct problems with these operand lengths (a 1-digit operand is 0..9, a longer one has no leading 0)."""
    return math.prod(count(d) for d in digits)


def train_counts(cfg: ArithmeticConfig) -> list[int]:
    """Training prompts per level: `train_size` split by weight, rounding by largest remainder so they sum exactly."""
    total = sum(cfg.level_weights)
    exact = [cfg.train_size * w / total for w in cfg.level_weights]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: cfg.train_size - sum(counts)]:
        counts[i] += 1
    return counts


def evalcount(cfg: ArithmeticConfig, level: int) -> int:
    """Held-out prompts of `level` (1-based): `eval_size`, or a quarter of a level too small to spare that many."""
    return min(cfg.eval_size, capacity(cfg.levels[level - 1]) // 4)


def make_prompt(a: int, b: int, level: int, id: str) -> Prompt:
    """The prompt for `a + b`; `meta` keeps the operands."""
    return Prompt(id=id, text=f"{BOS}{a}+{b}=", answer=str(a + b), level=level, meta={"a": a, "b": b})


def make_split(cfg: ArithmeticConfig) -> tuple[list[Prompt], list[Prompt]]:
    """The training pool (shuffled) and the held-out set (by level), deterministic under `cfg.seed`.

    Ids are `add-L{level}-{i:06d}` in the pool and `add-L{level}-eval-{i:06d}` in the held-out set.
    """
    train: list[Prompt] = []
    held_out: list[Prompt] = []
    for level, n_train in enumerate(train_counts(cfg), start=1):
        digits = cfg.levels[level - 1]
        n_eval = evalcount(cfg, level)
        eval_idx = _sample(digits, n_eval, random.Random(f"arithmetic-{cfg.seed}-L{level}-eval"))
        taken = set(eval_idx)
        # draw enough to cover every held-out collision, then skip those
        candidates = _sample(digits, n_train + n_eval, random.Random(f"arithmetic-{cfg.seed}-L{level}-train"))
        train_idx = [i for i in candidates if i not in taken][:n_train]
        held_out += [
            make_prompt(*_operands(digits, k), level, f"add-L{level}-eval-{i:06d}") for i, k in enumerate(eval_idx)
        ]
        train += [make_prompt(*_operands(digits, k), level, f"add-L{level}-{i:06d}") for i, k in enumerate(train_idx)]
    random.Random(f"arithmetic-{cfg.seed}-shuffle").shuffle(train)
    return train, held_out


def verify(completion: str, answer: str) -> float:
    """1.0 iff the completion, cut at the first `<eos>` and stripped of whitespace, is exactly the answer.

    The text alone cannot say whether generation stopped at EOS or at the length limit; callers that require EOS
    check the finish reason themselves.

    >>> verify("579", "579")
    1.0
    >>> verify(" 579<eos><pad>", "579")
    1.0
    >>> verify("5790", "579")
    0.0
    >>> verify("0579", "579")
    0.0
    >>> verify("", "579")
    0.0
    """
    return 1.0 if completion.split(EOS, 1)[0].strip() == answer else 0.0


def count(digits: int) -> int:
    """How many operands have this many digits."""
    return 10 if digits == 1 else 9 * 10 ** (digits - 1)


def low(digits: int) -> int:
    """The smallest operand with this many digits."""
    return 0 if digits == 1 else 10 ** (digits - 1)


def _sample(digits: tuple[int, int], k: int, rng: random.Random) -> list[int]:
    # random.sample over a range never materialises it, so 5-digit levels (8.1e9 problems) cost O(k)
    return rng.sample(range(capacity(digits)), k)


def _operands(digits: tuple[int, int], index: int) -> tuple[int, int]:
    nb = count(digits[1])
    return low(digits[0]) + index // nb, low(digits[1]) + index % nb


def max_new_tokens(cfg: ArithmeticConfig) -> int:
    """Tokens a correct completion needs at the hardest level: the longest sum's digits plus `<eos>`."""
    return max(max(digits) + 1 for digits in cfg.levels) + 1
