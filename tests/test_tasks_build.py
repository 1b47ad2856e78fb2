"""`tasks.build`: task names, templates and default verifiers wired from the config."""

from __future__ import annotations

import doctest
import json
import re
from collections import Counter

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.tiny import build_char_tokenizer
from reinforce_ada.tasks import arithmetic, build, templates
from reinforce_ada.tasks.arithmetic import ArithmeticConfig, make_split, verify
from reinforce_ada.tasks.templates import PAPER_SUFFIX, PAPER_SYSTEM, TEMPLATES, render
from reinforce_ada.training.config import TaskConfig


def test_file_task_with_paper_template(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"What is {i}+1?", "answer": str(i + 1)}) + "\n" for i in range(10)))
    train, held_out, verifier = build(TaskConfig(name="file", path=str(f), eval_size=2, template="paper"))
    assert len(train) == 8 and len(held_out) == 2
    assert all(p.text.rstrip().endswith("Assistant:") or PAPER_SUFFIX in p.text for p in train)
    assert verifier(" 3 ", "3") == 1.0  # files default to the exact verifier


def test_task_config_errors():
    with pytest.raises(ConfigError, match="gsm_symbolic"):
        TaskConfig(name="gsm8k")
    with pytest.raises(ConfigError, match="task.path"):
        TaskConfig(name="file")
    with pytest.raises(ConfigError, match="paper"):
        TaskConfig(template="fancy")


def test_task_max_prompt_chars_reaches_the_file_loader(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": "x" * (50 + i), "answer": str(i)}) + "\n" for i in range(4)))
    train, held_out, _ = build(TaskConfig(name="file", path=str(f), eval_size=1, max_prompt_chars=100))
    assert len(train) + len(held_out) == 4
    with pytest.raises(ConfigError, match="row 2, column 'prompt'.*limit is 50"):
        build(TaskConfig(name="file", path=str(f), eval_size=1, max_prompt_chars=50))
    with pytest.raises(ConfigError, match="task.max_prompt_chars"):
        TaskConfig(max_prompt_chars=0)


def test_a_broken_replacements_file_is_a_config_error(tmp_path):
    import shutil

    from reinforce_ada.tasks import gsm_symbolic

    real = sorted((gsm_symbolic.fetch_templates() / "symbolic").glob("*.toml"))[0]
    shutil.copy(real, tmp_path / real.name)
    (tmp_path / "replacements.json").write_text("{not json")
    with pytest.raises(ConfigError, match="replacements.json: not valid JSON"):
        gsm_symbolic.load_templates(tmp_path)


# --- (was tests/test_templates.py) ------------------------------------------------------------------------------------
# Prompt templates, with and without a tokenizer chat template.


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def chatml_tokenizer():
    tok = build_char_tokenizer()  # a fresh one: the session fixture must not be mutated
    tok.chat_template = CHATML
    return tok


def test_doctests():
    assert doctest.testmod(templates).failed == 0


def test_registry_shares_one_signature():
    assert sorted(TEMPLATES) == ["chat", "paper", "plain"]
    for fn in TEMPLATES.values():
        assert isinstance(fn("q"), str)


def test_plain_is_the_identity_with_any_tokenizer(chatml_tokenizer):
    assert render("plain", "12+3=") == "12+3="
    assert render("plain", "12+3=", chatml_tokenizer) == "12+3="


def test_paper_through_a_chat_template(chatml_tokenizer):
    got = render("paper", "What is 2+3?", chatml_tokenizer)
    assert got == (
        f"<|im_start|>system\n{PAPER_SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\nWhat is 2+3?{PAPER_SUFFIX}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert PAPER_SYSTEM == "Please reason step by step, and put your final answer within \\boxed{}."
    assert PAPER_SUFFIX == " Let's think step by step and output the final answer within \\boxed{}."


def test_chat_is_the_user_message_only(chatml_tokenizer):
    assert render("chat", "Hi", chatml_tokenizer) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_without_a_chat_template_a_plain_layout(char_tokenizer):
    assert not getattr(char_tokenizer, "chat_template", None)
    assert render("paper", "Q?", char_tokenizer) == f"System: {PAPER_SYSTEM}\nUser: Q?{PAPER_SUFFIX}\nAssistant:"
    assert render("chat", "Q?", char_tokenizer) == render("chat", "Q?") == "User: Q?\nAssistant:"


def test_unknown_template_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown prompt template 'nope'; choose one of \['chat', 'paper', 'plain'\]"):
        render("nope", "q")


# -- arithmetic -------------------------------------------------------------------------------------------------------
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


def test_arithmetic_doctests():
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
