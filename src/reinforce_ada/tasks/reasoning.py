"""General reasoning tasks from reasoning-gym (procedural, offline; `pip install 'reinforce-ada[reasoning]'`).

The task family `reasoning_gym:<dataset>`: a few of reasoning-gym's generators, chosen for what a small model can
learn, each with its levels, held-out split and the package's own scoring.
1) `FAMILY` is the only list of the datasets: name -> `Family` (one line of what it asks, the knob its levels turn,
   one config per level, and how its final answer is read). Level k is the k-th config: one difficulty knob turned
   up (animals to count legs of, words to count a letter in, numbers to sort, letters to reverse, people in the
   family), the others fixed, so the planner, the per-level report and the predictor read difficulty from `level`.
   `reasoning_gym:mix` is all of them in one pool, level k being each dataset's level k (the held-out split keeps
   `eval_size` prompts per level in all, shared between the datasets). `tasks.registry.register_reasoning_dataset`
   adds a dataset: one `Family` line.
2) Splits by seed: each level's held-out questions are drawn first, from a generator seed of their own (a hash of
   task.seed, dataset, level and split), then the training questions from another, skipping repeats and every
   held-out question. A level with fewer distinct questions than asked keeps what there is, with a warning.
   A split generates at most `MAX_GENERATED` questions (checked when the `[task]` config is built).
3) A prompt's answer is a JSON envelope, `{"reasoning_gym": dataset, "level", "seed", "index", "answer"}`: where the
   entry came from and its gold answer. The verifier regenerates the entry (question, answer, metadata) from it and
   scores with the dataset's own `score_answer`: nothing read from a file decides a score (number_sorting's scorer
   `eval`s its gold), and metadata some scorers read (the sort direction) comes back as the generator wrote it. An
   envelope whose gold does not match what this reasoning-gym regenerates (another version) raises: the run counts
   a verifier error rather than scoring against another question.
4) The model's final answer is the last `<answer>...</answer>` (reasoning-gym's convention), else the last
   `\\boxed{}` / `####` / "the answer is" (`tasks.answers`), else by the dataset's answer kind: the last number
   (`number`), the last `[...]` (`list`), the last word of the first non-empty line (`word`). One answer is
   extracted, never several tried. The score is the package's `score_answer`, read as full credit or none unless
   the family keeps its partial credit (`Family.partial`: spell_backward's per-letter credit, 0.8 at most when not
   exact). A departure: reasoning-gym's default scorer pays len(gold)/len(answer) for an answer that contains the
   gold, so "10" or "-1" earned 0.5 against gold "1", a reward a policy could collect by writing long numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import warnings
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.answers import _NUMBER, MAX_ANSWER_CHARS, extract_answer
from reinforce_ada.types import Prompt

PREFIX = "reasoning_gym:"
MIX = "mix"
INSTALL = "pip install 'reinforce-ada[reasoning]' (from a clone: pip install -e '.[reasoning]')"
KINDS = ("number", "list", "word")


@dataclasses.dataclass(frozen=True)
class Family:
    """One reasoning-gym dataset as a task: its levels and how its final answer is read."""

    summary: str
    knob: str
    """The config field(s) the levels turn, for the docs and the level test."""
    levels: tuple[dict[str, Any], ...]
    """Level k (1-based) is `create_dataset(name, **levels[k - 1])`."""
    answer: str = "number"
    """How a completion's answer is read when it marks none: number, list or word (module doc, 4)."""
    partial: bool = False
    """Keep the package's partial credit (else a score below 1 is 0; module doc, 4)."""

    def __post_init__(self) -> None:
        if not self.levels:
            raise ConfigError("a reasoning-gym family needs at least one level")
        if self.answer not in KINDS:
            raise ConfigError(f"reasoning-gym answer kind {self.answer!r} is not valid; choose one of {list(KINDS)}")


FAMILY: dict[str, Family] = {
    "leg_counting": Family(
        "arithmetic word problems: total legs of a list of animals",
        "min_animals = max_animals (kinds of animal)",
        tuple(dict(min_animals=k, max_animals=k, min_instances=1, max_instances=15) for k in (1, 2, 3, 4, 5)),
    ),
    "letter_counting": Family(
        "how many times a letter appears in a span of text",
        "min_words = max_words (words in the span)",
        tuple(dict(min_words=k, max_words=k) for k in (1, 2, 4, 8, 16)),
    ),
    "number_sorting": Family(
        "sort whole numbers in -99..99, ascending or descending, as a list",
        "min_numbers = max_numbers (numbers to sort)",
        tuple(
            dict(min_numbers=k, max_numbers=k, min_decimals=0, max_decimals=0, min_value=-99, max_value=99)
            for k in (2, 3, 4, 6, 8)
        ),
        answer="list",
    ),
    "spell_backward": Family(
        "spell a word backward",
        "min_word_len = max_word_len (letters in the word)",
        tuple(dict(min_word_len=k, max_word_len=k) for k in (3, 4, 5, 7, 9)),
        answer="word",
        partial=True,
    ),
    "family_relationships": Family(
        "how two people of a described family are related (one word)",
        "min_family_size = max_family_size (people in the family)",
        tuple(dict(min_family_size=k, max_family_size=k) for k in (3, 4, 5, 6, 8)),
        answer="word",
    ),
}
"""The chosen datasets: short questions and answers, a cheap exact scorer, one knob (module doc, 1)."""


def require() -> Any:
    """The reasoning_gym package, or a ConfigError naming the install command."""
    try:
        import reasoning_gym
    except ImportError:
        raise ConfigError(f"reasoning-gym tasks need reasoning-gym, not installed here: {INSTALL}") from None
    return reasoning_gym


def task_names() -> list[str]:
    return [PREFIX + n for n in (*FAMILY, MIX)]


# -- generation ---------------------------------------------------------------------------------------------------
def generator_seed(seed: int, dataset: str, level: int, split: str) -> int:
    """The reasoning-gym seed of one level's split: entries are `Random(seed + index)`, so the seeds of the splits
    are hashed far apart rather than numbered next to each other (seed 5's entry 1 would be seed 6's entry 0)."""
    digest = hashlib.sha256(f"reasoning_gym-{seed}-{dataset}-L{level}-{split}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


@functools.lru_cache(maxsize=256)
def _generator(dataset: str, level: int, seed: int) -> Any:
    rg = require()
    cfg = level_config(dataset, level)
    try:
        return rg.create_dataset(dataset, seed=seed, size=2**31 - 1, **cfg)
    except (AssertionError, TypeError, ValueError) as e:  # deliberate: a bad level config, named
        raise ConfigError(f"{PREFIX}{dataset} level {level} ({cfg}): reasoning-gym refused it: {e}") from None


def level_config(dataset: str, level: int) -> dict[str, Any]:
    levels = FAMILY[dataset].levels
    if not 1 <= level <= len(levels):
        raise ConfigError(f"{PREFIX}{dataset} has levels 1..{len(levels)}, not {level}")
    return dict(levels[level - 1])


@functools.lru_cache(maxsize=16_384)
def entry(dataset: str, level: int, seed: int, index: int) -> dict[str, Any]:
    """One reasoning-gym entry (question, answer, metadata), the same on every call and machine."""
    return _generator(dataset, level, seed)[index]


def envelope(dataset: str, level: int, seed: int, index: int, gold: str) -> str:
    return json.dumps({"reasoning_gym": dataset, "level": level, "seed": seed, "index": index, "answer": gold})


def read_envelope(answer: str) -> dict[str, Any] | None:
    """The envelope's fields, or None when `answer` is not one (checked field by field)."""
    text = answer.strip()
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    ints = ("level", "seed", "index")
    if not isinstance(obj, dict) or not isinstance(obj.get("reasoning_gym"), str):
        return None
    if not all(isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool) and obj[k] >= 0 for k in ints):
        return None
    return obj if isinstance(obj.get("answer"), str) else None


def draw(dataset: str, level: int, n: int, seed: int, split: str, skip: set[str]) -> list[Prompt]:
    """Up to `n` distinct prompts of one level, none of whose questions is in `skip` (which grows by them)."""
    gen_seed = generator_seed(seed, dataset, level, split)
    out: list[Prompt] = []
    tag = "" if split == "train" else f"{split}-"
    for index in range(max(20 * n, 1000) if n else 0):
        if len(out) >= n:
            break
        e = entry(dataset, level, gen_seed, index)
        if e["question"] in skip:
            continue
        skip.add(e["question"])
        answer = envelope(dataset, level, gen_seed, index, str(e["answer"]))
        pid = f"rg-{dataset}-L{level}-{tag}{len(out):06d}"
        out.append(Prompt(id=pid, text=e["question"], answer=answer, level=level, meta={"dataset": dataset}))
    if len(out) < n:
        warnings.warn(
            f"{PREFIX}{dataset} level {level} has only {len(out)} distinct {split} questions left (asked for {n}); "
            "the split keeps those",
            stacklevel=3,
        )
    return out


def level_counts(weights: tuple[float, ...], total: int) -> list[int]:
    """`total` split by weight, largest remainders rounding, so the counts sum exactly.

    >>> level_counts((1, 1, 1), 10)
    [4, 3, 3]
    """
    s = sum(weights)
    exact = [total * w / s for w in weights]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: counts[i] - exact[i])[: total - sum(counts)]:
        counts[i] += 1
    return counts


MAX_GENERATED = 100_000
"""Most questions one split may generate (training prompts plus `eval_size` per level): about 1 ms each (2 s for 2,000
on the slowest dataset, more when repeats are skipped), so under two minutes; `task.train_size` 1e9 kept the command
silent for days. Checked when the `[task]` config is built (`check_sizes`), before any model is loaded."""


def check_sizes(dataset: str, train_size: int, eval_size: int) -> None:
    """Refuse a split that would generate more than `MAX_GENERATED` questions, naming both sizes and the bound."""
    names = list(FAMILY) if dataset == MIX or dataset not in FAMILY else [dataset]
    levels = max(len(FAMILY[n].levels) for n in names)
    asked = train_size + eval_size * levels
    if asked > MAX_GENERATED:
        raise ConfigError(
            f"task.train_size={train_size} and task.eval_size={eval_size} ({levels} levels): {PREFIX}{dataset} "
            f"generates its questions one at a time (about 1 ms each), so {asked:,} would keep the command silent "
            f"for about {asked / 3.6e6:,.1f} hours before anything else; train_size + {levels} x eval_size must be "
            f"<= {MAX_GENERATED:,}"
        )


def make_split(
    dataset: str, *, train_size: int, eval_size: int, seed: int, weights: tuple[float, ...] | None = None
) -> tuple[list[Prompt], list[Prompt]]:
    """(training prompts, shuffled; held-out prompts, `eval_size` per level) of a dataset, or of all for `mix`
    (`check_sizes` first)."""
    import random

    check_sizes(dataset, train_size, eval_size)
    names = list(FAMILY) if dataset == MIX else [dataset]
    n_levels = max(len(FAMILY[n].levels) for n in names)
    w = weights if weights is not None else (1.0,) * n_levels
    if len(w) != n_levels or any(not x >= 0 for x in w) or sum(w) <= 0:
        raise ConfigError(
            f"task.level_weights={list(w)} does not fit {PREFIX}{dataset}: give {n_levels} weights >= 0 with a "
            "positive sum (one per level), or leave it at its default for equal shares"
        )
    train: list[Prompt] = []
    held_out: list[Prompt] = []
    per_name = level_counts((1.0,) * len(names), train_size)
    for k, (name, n_name) in enumerate(zip(names, per_name, strict=True)):
        n_eval = [level_counts((1.0,) * len(names), eval_size)[k]] * len(FAMILY[name].levels)
        levels = len(FAMILY[name].levels)
        counts = level_counts(w[:levels], n_name) if sum(w[:levels]) > 0 else [0] * levels
        for level, n_train in enumerate(counts, start=1):
            seen: set[str] = set()
            held_out += draw(name, level, n_eval[level - 1], seed, "eval", seen)
            train += draw(name, level, n_train, seed, "train", seen)
    random.Random(f"reasoning_gym-{seed}-{dataset}-shuffle").shuffle(train)
    return train, held_out


def split(task: Any, dataset: str, *, train: bool = True) -> tuple[list[Prompt], list[Prompt]]:
    """The split of `reasoning_gym:<dataset>` under a `[task]` config (its `task.name` may be another task's: `eval`
    passes the run's). `task.level_weights` is read when it has one weight per level; left at its default (the
    arithmetic task's seven) every level gets an equal share. `train=False`: the held-out prompts only."""
    from reinforce_ada.tasks.arithmetic import ArithmeticConfig

    require()
    if dataset not in FAMILY and dataset != MIX:
        raise ConfigError(f"{PREFIX}{dataset} is not a reasoning-gym task; choose one of {task_names()}")
    weights = tuple(task.level_weights)
    default = weights == ArithmeticConfig().level_weights
    size = task.train_size if train else 0
    return make_split(
        dataset, train_size=size, eval_size=task.eval_size, seed=task.seed, weights=None if default else weights
    )


# -- scoring ------------------------------------------------------------------------------------------------------
_TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
_LIST = re.compile(r"\[[^\[\]]*\]")


def final_answer(completion: str, kind: str) -> str | None:
    """The completion's one final answer (module doc, 4); None when it has none.

    >>> final_answer("so <answer>12</answer>", "number"), final_answer("It has 3 legs.", "number")
    ('12', '3')
    >>> final_answer("Sorted: ['1', '5'] done", "list"), final_answer("The answer: daughter-in-law.\\nOk", "word")
    ("['1', '5']", 'daughter-in-law')
    """
    tags = _TAG.findall(completion)
    if tags:
        return tags[-1].strip()
    marked = extract_answer(completion, last_number=False)
    if marked:
        return marked
    if kind == "number":
        found = _NUMBER.findall(completion)
        return found[-1].replace(",", "") if found else None
    if kind == "list":
        found = _LIST.findall(completion)
        return found[-1] if found else None
    line = next((ln.strip() for ln in completion.splitlines() if ln.strip()), "")
    words = line.split()
    return words[-1].strip(".,;:!?\"'`*()") if words else None


def verify(completion: str, answer: str) -> float:
    """The `reasoning_gym` verifier: the dataset's own `score_answer` on the completion's final answer (module doc).

    Raises ValueError for an answer that is not an envelope of a family dataset, or whose gold this reasoning-gym
    does not regenerate (the scorer counts it as a verifier error).
    """
    env = read_envelope(answer)
    if env is None or env["reasoning_gym"] not in FAMILY:
        raise ValueError(f"not a reasoning-gym answer of {sorted(FAMILY)}: {answer!r:.80}")
    name = env["reasoning_gym"]
    e = entry(name, env["level"], env["seed"], env["index"])
    if str(e["answer"]) != env["answer"]:
        raise ValueError(
            f"{PREFIX}{name} level {env['level']} entry {env['index']} regenerates with gold {e['answer']!r}, not "
            f"{env['answer']!r}: made by another reasoning-gym version or level table"
        )
    pred = final_answer(completion, FAMILY[name].answer)
    if not pred or len(pred) > MAX_ANSWER_CHARS:
        return 0.0
    score = float(_generator(name, env["level"], env["seed"]).score_answer(pred, e))
    return score if FAMILY[name].partial or score >= 1.0 else 0.0


def answer_format(answer: str) -> str | None:
    """Why `answer` is not a reasoning-gym envelope of a family dataset (None: it is); the verifiers' fit check."""
    env = read_envelope(answer)
    if env is None:
        return "it is not a reasoning-gym answer envelope (JSON with reasoning_gym, level, seed, index, answer)"
    if env["reasoning_gym"] not in FAMILY:
        return f"its dataset {env['reasoning_gym']!r} is not one of {sorted(FAMILY)}"
    return None
