"""The studies' tests share the package tests' fixtures (a tiny Llama, its tokenizer and folder)."""

from tests.conftest import char_tokenizer, model_dir, tiny_llama  # noqa: F401
