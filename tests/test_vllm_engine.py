"""The vLLM engine's output conversion runs on CPU with fake outputs; the engine itself needs CUDA + vLLM."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from reinforce_ada.engines import engine_class
from reinforce_ada.engines.vllm import to_samples
from reinforce_ada.types import Prompt, Request


def completion(ids, lps, reason, text="t"):
    return NS(
        token_ids=ids,
        logprobs=[{t: NS(logprob=lp), 99: NS(logprob=-9.0)} for t, lp in zip(ids, lps, strict=True)],
        finish_reason=reason,
        text=text,
    )


def test_to_samples_order_logprobs_and_finish_reasons():
    reqs = [Request(Prompt(id="a", text="x"), 2), Request(Prompt(id="b", text="y"), 1)]
    outs = [
        NS(outputs=[completion([5, 1], [-0.1, -0.2], "stop"), completion([5, 6], [-0.3, -0.4], "length")]),
        NS(outputs=[completion([7], [-0.5], "stop")]),
    ]
    s = to_samples(reqs, outs, eos_ids=[1])
    assert [(x.prompt_id, x.index, x.finish_reason) for x in s] == [
        ("a", 0, "eos"),
        ("a", 1, "length"),
        ("b", 0, "stop"),
    ]
    assert s[0].logprobs == [-0.1, -0.2] and s[1].num_tokens == 2
    with pytest.raises(RuntimeError, match="asked 3"):
        to_samples([Request(Prompt(id="a", text="x"), 3)], outs[:1])


def test_registry_names_vllm():
    assert engine_class("vllm").__name__ == "VLLMEngine"


def test_bad_sampling_settings_fail_before_vllm_is_needed(char_tokenizer):
    from reinforce_ada.engines.vllm import VLLMEngine
    from reinforce_ada.errors import ConfigError

    with pytest.raises(ConfigError, match="top_p"):
        VLLMEngine("models/none", char_tokenizer, top_p=0.0)
