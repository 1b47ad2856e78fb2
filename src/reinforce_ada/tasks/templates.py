"""Prompt templates: how a dataset question becomes the text the policy is conditioned on.

Each template is `(question, tokenizer=None) -> str` in one registry; `render(name, question, tokenizer)` looks one
up. Chat templates go through the tokenizer's own chat template when it has one (so a Qwen or SmolLM model sees the
format it was tuned on), else through a plain "System: / User: / Assistant:" layout.

`paper` is the prompt of the Reinforce-Ada experiments (the official code's data preprocessing): the system message
asks for step-by-step reasoning and a boxed answer, and the user message repeats the request after the question.
Pair it with the `math` verifier, which reads the last `\\boxed{}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reinforce_ada.errors import ConfigError

PAPER_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
PAPER_SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."

Template = Callable[..., str]
"""`(question: str, tokenizer=None) -> str`."""


def _has_chat_template(tokenizer: Any) -> bool:
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def apply_chat(messages: list[dict[str, str]], tokenizer: Any = None) -> str:
    """Messages through the tokenizer's chat template (with the assistant turn opened), else a plain text layout.

    >>> apply_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    'System: Be brief.\\nUser: 2+2?\\nAssistant:'
    """
    if _has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join([*lines, "Assistant:"])


def plain(question: str, tokenizer: Any = None) -> str:
    """The question as it is (the built-in arithmetic task and base models).

    >>> plain("1+2=")
    '1+2='
    """
    return question


def paper(question: str, tokenizer: Any = None) -> str:
    """The paper's system prompt and step-by-step request, as a chat.

    >>> print(paper("What is 2+3?"))
    System: Please reason step by step, and put your final answer within \\boxed{}.
    User: What is 2+3? Let's think step by step and output the final answer within \\boxed{}.
    Assistant:
    """
    messages = [{"role": "system", "content": PAPER_SYSTEM}, {"role": "user", "content": question + PAPER_SUFFIX}]
    return apply_chat(messages, tokenizer)


def chat(question: str, tokenizer: Any = None) -> str:
    """The question as the only (user) message: the model's own default system prompt, if its template has one.

    >>> chat("Hi")
    'User: Hi\\nAssistant:'
    """
    return apply_chat([{"role": "user", "content": question}], tokenizer)


TEMPLATES: dict[str, Template] = {"plain": plain, "paper": paper, "chat": chat}


def render(name: str, question: str, tokenizer: Any = None) -> str:
    """`question` through the template called `name` (and the tokenizer's chat template, where it has one).

    An unknown name raises ConfigError (a ValueError) listing the valid ones.
    """
    if name not in TEMPLATES:
        raise ConfigError(f"unknown prompt template {name!r}; choose one of {sorted(TEMPLATES)}")
    return TEMPLATES[name](question, tokenizer)
