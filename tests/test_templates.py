"""Prompt templates, with and without a tokenizer chat template."""

from __future__ import annotations

import doctest

import pytest

from reinforce_ada.models.tiny import build_char_tokenizer
from reinforce_ada.tasks import templates
from reinforce_ada.tasks.templates import PAPER_SUFFIX, PAPER_SYSTEM, TEMPLATES, render

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
