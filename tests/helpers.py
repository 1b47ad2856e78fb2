"""Importable helpers for tests that go through `module:function` names."""

from __future__ import annotations


def even_length(completion: str, answer: str) -> float:
    """A reward any random policy can earn: completions of even length."""
    return float(len(completion) % 2 == 0)


def teacher_forced_logprobs(model, tokenizer, prompts: dict, samples, temperature: float):
    """The policy's log-probs of each sample's completion, recomputed in one forward (no grad)."""
    import torch

    from reinforce_ada.models.forward import sequence_logprobs

    with torch.no_grad():
        return sequence_logprobs(
            model,
            [prompts[s.prompt_id] for s in samples],
            [s.token_ids for s in samples],
            tokenizer.pad_token_id,
            temperature=temperature or 1.0,  # greedy samples are scored under the untempered distribution
        )
