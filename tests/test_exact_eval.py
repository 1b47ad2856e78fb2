"""Exact evaluation: the pass rate at temperature T from one forward pass, checked against sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada.engines import local_engine
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.exact import answer_ids, answer_logprobs, exact_pass_rates, summarize_exact
from reinforce_ada.evaluation.metrics import sample_correct
from reinforce_ada.tasks import arithmetic
from reinforce_ada.training.warm_start import SHIPPED_DIR
from reinforce_ada.types import Prompt


def P(a: int, b: int, level: int = 1) -> Prompt:
    return arithmetic.make_prompt(a, b, level, f"p{a}-{b}")


@pytest.fixture(scope="module")
def warm():
    """The shipped warm start: a model with pass rates between 0 and 1 (package data, no training)."""
    return AutoModelForCausalLM.from_pretrained(SHIPPED_DIR).eval(), AutoTokenizer.from_pretrained(SHIPPED_DIR)


def test_answer_ids_add_eos_unless_the_answer_fills_the_limit(char_tokenizer):
    tok = char_tokenizer
    ids = answer_ids(tok, [P(12, 30), P(999, 1)], max_new_tokens=4)
    assert ids[0] == tok.encode("42") + [tok.eos_token_id]
    assert ids[1] == tok.encode("1000")  # 4 tokens fill the limit: cut by length, no EOS, still accepted
    assert answer_ids(tok, [P(999, 1)], max_new_tokens=3) == [None]
    rates = exact_pass_rates(AutoModelForCausalLM.from_pretrained(SHIPPED_DIR), tok, [P(999, 1)], max_new_tokens=3)
    assert rates.tolist() == [0.0]


def test_matches_the_product_of_next_token_probabilities(tiny_llama, char_tokenizer):
    tok, model = char_tokenizer, tiny_llama
    prompts = [P(3, 4), P(12, 30, 2), P(7, 8)]
    got = answer_logprobs(model, tok, prompts, temperature=0.7, batch_size=2)
    for p, lp in zip(prompts, got, strict=True):
        seq = tok.encode(p.text)
        total = 0.0
        for t in tok.encode(p.answer) + [tok.eos_token_id]:  # one token at a time, no padding, no batching
            with torch.no_grad():
                logits = model(torch.tensor([seq])).logits[0, -1].double() / 0.7
            total += float(torch.log_softmax(logits, -1)[t])
            seq.append(t)
        assert lp == pytest.approx(total, abs=1e-4)  # float32 batched vs one-at-a-time: ~1e-5 apart on some CPUs


def test_agrees_with_sampled_accuracy_within_monte_carlo_error(warm):
    model, tok = warm
    torch.set_num_threads(1)
    prompts = [P(a, b, 2 + (a > 50)) for a, b in ((12, 34), (58, 67), (45, 55), (73, 19), (66, 77), (81, 9))]
    for temp, decode in ((1.0, "auto"), (0.7, "hf")):  # the trainer's SlotEngine, and HFEngine
        exact = exact_pass_rates(model, tok, prompts, temperature=temp, max_new_tokens=8)
        assert 0.05 < exact.mean() < 0.95  # a model that is neither always right nor always wrong
        eng = local_engine(
            model,
            tok,
            decode=decode,
            streaming=False,
            slots=256,
            batch_size=512,
            max_new_tokens=8,
            temperature=temp,
            seed=3,
        )
        correct, errors = sample_correct(eng, prompts, arithmetic.verify, samples=800)
        sampled = np.array([np.mean(correct[p.id]) for p in prompts])
        se = np.sqrt(np.clip(exact * (1 - exact), 1e-4, None) / 800)
        assert errors == 0
        assert np.all(np.abs(sampled - exact) < 4.5 * se), (temp, sampled, exact)
        pooled_se = np.sqrt(np.sum(exact * (1 - exact) / 800)) / len(prompts)
        assert abs(sampled.mean() - exact.mean()) < 4 * pooled_se


def test_summarize_exact_weights_levels():
    prompts = [P(1, 1, 1), P(2, 2, 1), P(10, 10, 2)]
    m = summarize_exact(prompts, [1.0, 0.5, 0.1], {1: 1.0, 2: 3.0})
    assert m["eval_accuracy"] == pytest.approx(1.6 / 3)
    assert m["eval_accuracy_L1"] == pytest.approx(0.75) and m["eval_accuracy_L2"] == pytest.approx(0.1)
    assert m["eval_accuracy_weighted"] == pytest.approx((0.75 + 3 * 0.1) / 4)
    with pytest.raises(ConfigError, match="levels"):
        summarize_exact(prompts, [1.0, 0.5, 0.1], {3: 1.0})
    with pytest.raises(ConfigError, match="one pass rate per prompt"):
        summarize_exact(prompts, [1.0], None)
