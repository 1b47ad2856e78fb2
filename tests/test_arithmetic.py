from __future__ import annotations

import doctest
import re
from collections import Counter

import pytest

from reinforce_ada.tasks import arithmetic
from reinforce_ada.tasks.arithmetic import ArithmeticConfig, make_split, verify

SMALL = ArithmeticConfig(
    levels=((1, 1), (2, 2), (3, 4)), level_weights=(0.1, 0.3, 0.6), train_size=300, eval_size=40, seed=7
)


def test_split_is_deterministic_and_seeded():
    assert make_split(SMALL) == make_split(SMALL)
    train, held_out = make_split(SMALL)
    other_train, other_held_out = make_split(ArithmeticConfig(**{**SMALL.__dict__, "seed": 8}))
    assert [p.text for p in train] != [p.text for p in other_train]
    assert [p.text for p in held_out] != [p.text for p in other_held_out]


def test_no_overlap_and_unique_ids():
    train, held_out = make_split(SMALL)
    assert not {p.text for p in train} & {p.text for p in held_out}
    assert len({p.text for p in train}) == len(train)
    assert len({p.text for p in held_out}) == len(held_out)
    ids = [p.id for p in train + held_out]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"add-L\d-\d{6}", p.id) for p in train)
    assert all(re.fullmatch(r"add-L\d-eval-\d{6}", p.id) for p in held_out)
    assert all(p.id.startswith(f"add-L{p.level}-") for p in train + held_out)


def test_counts_follow_weights_and_small_levels_hold_out_a_quarter():
    train, held_out = make_split(SMALL)
    assert len(train) == SMALL.train_size
    assert Counter(p.level for p in train) == {1: 30, 2: 90, 3: 180}
    # (1, 1) has 100 problems: a quarter held out; the others have room for eval_size
    assert Counter(p.level for p in held_out) == {1: 25, 2: 40, 3: 40}
    assert arithmetic.train_counts(ArithmeticConfig(level_weights=(1,) * 7, train_size=10)) == [2, 2, 2, 1, 1, 1, 1]


def test_prompt_text_answer_and_operand_lengths():
    train, held_out = make_split(SMALL)
    for p in train + held_out:
        a, b = p.meta["a"], p.meta["b"]
        assert p.text == f"<bos>{a}+{b}="
        assert p.answer == str(a + b)
        assert (len(str(a)), len(str(b))) == SMALL.levels[p.level - 1]


def test_held_out_set_does_not_depend_on_the_pool():
    _, held_out = make_split(SMALL)
    _, other = make_split(ArithmeticConfig(**{**SMALL.__dict__, "train_size": 50, "level_weights": (0, 1, 1)}))
    assert held_out == other


def test_default_config_splits_and_fits_the_position_budget():
    cfg = ArithmeticConfig()
    train, held_out = make_split(cfg)
    assert len(train) == cfg.train_size
    assert len(held_out) == 25 + 256 * (len(cfg.levels) - 1)
    longest = max(len(p.text) - len("<bos>") + 1 for p in train + held_out)  # <bos> is one token
    assert longest + arithmetic.max_new_tokens(cfg) <= 64
    assert arithmetic.max_new_tokens(cfg) == 7  # 5+5 digits: 6-digit sum, then <eos>


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("579", "579", 1.0),
        ("579<eos>", "579", 1.0),
        (" 579\n<eos>12", "579", 1.0),
        ("57", "579", 0.0),
        ("5790", "579", 0.0),
        ("579 1", "579", 0.0),
        ("<eos>579", "579", 0.0),
        ("", "0", 0.0),
    ],
)
def test_verify(completion, answer, expected):
    assert verify(completion, answer) == expected


def test_doctests():
    assert doctest.testmod(arithmetic).failed == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"levels": (), "level_weights": ()}, "levels"),
        ({"levels": ((0, 1),), "level_weights": (1,)}, "levels"),
        ({"levels": ((1, 2, 3),), "level_weights": (1,)}, "levels"),
        ({"level_weights": (1, 1)}, "level_weights"),
        ({"level_weights": (-1, 1, 1, 1, 1, 1, 1)}, "level_weights"),
        ({"level_weights": (0,) * 7}, "level_weights"),
        ({"train_size": 0}, "train_size"),
        ({"eval_size": -1}, "eval_size"),
        ({"level_weights": (1, 0, 0, 0, 0, 0, 0)}, "train_size"),  # 4096 one-digit sums do not exist
    ],
)
def test_bad_config_raises_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"ArithmeticConfig.{field}"):
        ArithmeticConfig(**kwargs)
