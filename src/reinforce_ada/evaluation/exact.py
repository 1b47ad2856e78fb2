"""Exact evaluation: the pass rate a verifier would measure at temperature T, without sampling it.

1) For an exact-answer task (one accepted string per prompt), a sample is correct iff the policy writes the answer's
   tokens and then stops. Its probability is the product of the model's probabilities of those tokens and of EOS
   under `softmax(logits / T)` (top-k off, top-p 1, as the paper's evaluation samples): one teacher-forced forward
   pass per prompt, `models.forward.sequence_logprobs`, with no Monte-Carlo error. Ave@k of any k estimates exactly
   this number, so thousands of held-out prompts every few steps cost about as much as one sampled step.
2) A completion whose answer fills `max_new_tokens` exactly is cut by the length limit with no EOS; the engines'
   verifiers still accept it, so there the answer's tokens alone are counted. An answer longer than that counts 0.
3) What it does not count (so it is a lower bound of the sampled accuracy): other strings the verifier also accepts.
   For `tasks.arithmetic.verify` those are whitespace around the answer (`" 579"`), special tokens that decoding
   drops (`"5<unk>79"`), and the answer filled up to the length limit with such tokens instead of EOS; for a BPE
   tokenizer, other tokenizations of the same string. On the shipped warm start none of 15,055 correct samples (32
   per held-out prompt, 1,561 prompts) was such a variant, and sampled minus exact accuracy was +0.0007 +- 0.0015;
   `reinforce-ada compare` re-checks the gap at the end of every run.
4) For the long-answer task (`tasks.running_sums`) the answer's string is the canonical working and result: the rate
   is exact under its strict verifier and a lower bound under its default one, which checks only the result
   (`training.oracle`, 3).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import sequence_logprobs
from reinforce_ada.types import Prompt


def answer_ids(tokenizer: Any, prompts: Sequence[Prompt], max_new_tokens: int | None = None) -> list[list[int] | None]:
    """The completion each prompt is scored on: the answer's tokens, then EOS unless the answer fills the length
    limit; None where the answer cannot fit in `max_new_tokens` (pass rate 0)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ConfigError("exact evaluation needs a tokenizer with an EOS token (it scores answer + EOS)")
    out: list[list[int] | None] = []
    encoded = tokenizer([p.answer for p in prompts], add_special_tokens=False)["input_ids"] if prompts else []
    for ids in map(list, encoded):
        if max_new_tokens is None or len(ids) < max_new_tokens:
            out.append([*ids, eos])
        else:
            out.append(ids if len(ids) == max_new_tokens else None)
    return out


@torch.no_grad()
def answer_logprobs(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    *,
    temperature: float = 1.0,
    max_new_tokens: int | None = None,
    batch_size: int = 1024,
) -> np.ndarray:
    """log P(answer's completion | prompt) per prompt at `temperature` (float64 array; -inf where it cannot fit)."""
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    targets = answer_ids(tokenizer, prompts, max_new_tokens)
    out = np.full(len(prompts), -np.inf)
    live = [i for i, t in enumerate(targets) if t is not None]
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, len(live), batch_size):
            idx = live[lo : lo + batch_size]
            prompt_ids = tokenizer([prompts[i].text for i in idx], add_special_tokens=False)["input_ids"]
            logp_BT, _, _ = sequence_logprobs(
                model, prompt_ids, [targets[i] for i in idx], pad, temperature=temperature
            )
            out[idx] = logp_BT.double().sum(-1).cpu().numpy()  # padded positions are 0
    finally:
        model.train(was_training)
    return out


def exact_pass_rates(model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt], **kw: Any) -> np.ndarray:
    """P(a sample at temperature T is the answer), per prompt: `exp(answer_logprobs(...))`."""
    return np.exp(answer_logprobs(model, tokenizer, prompts, **kw))


def summarize_exact(
    prompts: Sequence[Prompt], rates: Sequence[float], level_weights: Mapping[Any, float] | None = None
) -> dict[str, float]:
    """`eval_accuracy` (mean pass rate), `eval_accuracy_L{level}` per level and, given `level_weights`,
    `eval_accuracy_weighted`: the levels' means weighted like a training pool (weights are normalised; a level
    with weight but no prompts is an error)."""
    if len(prompts) != len(rates) or not prompts:
        raise ConfigError(f"need one pass rate per prompt and at least one prompt; got {len(prompts)} and {len(rates)}")
    by_level: dict[Any, list[float]] = defaultdict(list)
    for p, r in zip(prompts, rates, strict=True):
        by_level[p.level].append(float(r))
    m = {"eval_accuracy": float(np.mean(rates))}
    for level, rs in sorted(by_level.items(), key=lambda kv: str(kv[0])):
        m[f"eval_accuracy_L{level}"] = float(np.mean(rs))
    if level_weights is not None:
        total = sum(w for w in level_weights.values() if w > 0)
        missing = [lv for lv, w in level_weights.items() if w > 0 and lv not in by_level]
        if missing or total <= 0:
            raise ConfigError(f"level weights {dict(level_weights)} name levels without prompts {missing} or sum to 0")
        m["eval_accuracy_weighted"] = float(
            sum(w * np.mean(by_level[lv]) for lv, w in level_weights.items() if w > 0) / total
        )
    return m
