from __future__ import annotations

import math

import pytest
import torch

from reinforce_ada.engines.hf import HFEngine, filter_logits
from reinforce_ada.models.forward import left_pad, right_pad
from reinforce_ada.models.tiny import build_char_tokenizer
from reinforce_ada.types import Prompt, Request
from tests.helpers import teacher_forced_logprobs

PROMPTS = ["<bos>1+2=", "<bos>12*34=", "<bos>7", "<bos>99-1= 3", "<bos>5*5=", "<bos>0"]
"""Different lengths, so left padding is exercised."""


def _requests(k: int = 1) -> list[Request]:
    return [Request(Prompt(f"p{i}", text), k) for i, text in enumerate(PROMPTS)]


def _hf_greedy(model, tok, max_new_tokens: int) -> list[list[int]]:
    """`model.generate` on the same left-padded batch, cut after the first EOS (kept)."""
    ids_BP, mask_BP = left_pad([tok.encode(p) for p in PROMPTS], tok.pad_token_id)
    out = model.generate(
        input_ids=ids_BP,
        attention_mask=mask_BP,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    rows = []
    for row in out[:, ids_BP.shape[1] :].tolist():
        end = row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
        rows.append(row[:end])
    return rows


@pytest.mark.parametrize("drop_finished", [True, False])
def test_greedy_matches_model_generate(tiny_llama, char_tokenizer, drop_finished):
    expected = _hf_greedy(tiny_llama, char_tokenizer, 12)
    assert any(row[-1] == char_tokenizer.eos_token_id for row in expected), "fixture should hit EOS somewhere"
    engine = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=12, temperature=0, drop_finished=drop_finished)
    samples = engine.generate(_requests())
    assert [s.token_ids for s in samples] == expected
    for s in samples:
        hit_eos = s.token_ids[-1] == char_tokenizer.eos_token_id
        assert s.finish_reason == ("eos" if hit_eos else "length")
        assert s.text == char_tokenizer.decode(s.token_ids, skip_special_tokens=True)


def test_greedy_is_independent_of_micro_batching(tiny_llama, char_tokenizer):
    big = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=10, temperature=0).generate(_requests(2))
    small = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=10, temperature=0, batch_size=3).generate(_requests(2))
    assert [s.token_ids for s in big] == [s.token_ids for s in small]


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p", "drop_finished"),
    [(0.0, 0, 1.0, True), (1.0, 0, 1.0, True), (0.7, 5, 0.9, True), (1.3, 0, 1.0, False)],
)
def test_logprobs_match_teacher_forced_forward(tiny_llama, char_tokenizer, temperature, top_k, top_p, drop_finished):
    engine = HFEngine(
        tiny_llama,
        char_tokenizer,
        max_new_tokens=12,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        drop_finished=drop_finished,
        seed=3,
    )
    samples = engine.generate(_requests(k=4))
    prompt_of = {f"p{i}": char_tokenizer.encode(p) for i, p in enumerate(PROMPTS)}
    logp_BT, mask_BT, _ = teacher_forced_logprobs(tiny_llama, char_tokenizer, prompt_of, samples, temperature)
    old_logp_BT, old_mask_BT = right_pad([s.logprobs for s in samples])
    assert torch.equal(mask_BT, old_mask_BT)
    assert torch.allclose(logp_BT, old_logp_BT, atol=1e-4)


def test_request_order_indices_and_fields(tiny_llama, char_tokenizer):
    requests = [
        Request(Prompt("a", "<bos>1+1="), 2),
        Request(Prompt("b", "<bos>3"), 0),
        Request(Prompt("c", "<bos>4"), 3),
    ]
    samples = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=6, batch_size=4).generate(requests)
    assert [(s.prompt_id, s.index) for s in samples] == [("a", 0), ("a", 1), ("c", 0), ("c", 1), ("c", 2)]
    for s in samples:
        assert s.reward is None and s.finish_reason in {"eos", "stop", "length"}
        assert s.num_tokens == len(s.token_ids) == len(s.logprobs) <= 6
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in s.logprobs)
    assert HFEngine(tiny_llama, char_tokenizer).generate([]) == []


def test_seeded_determinism_and_state_dict(tiny_llama, char_tokenizer):
    def run(engine):
        return [s.token_ids for s in engine.generate(_requests(k=3))]

    a, b = HFEngine(tiny_llama, char_tokenizer, seed=1), HFEngine(tiny_llama, char_tokenizer, seed=1)
    state = a.state_dict()
    first = run(a)
    assert first == run(b)
    assert run(a) != first, "the generator advances across calls"
    assert run(HFEngine(tiny_llama, char_tokenizer, seed=2)) != first
    a.load_state_dict(state)
    assert run(a) == first


def test_stop_string_ends_row_and_is_cut_from_text(tiny_llama, char_tokenizer):
    base = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=12, temperature=0).generate(_requests())
    row = next(i for i, s in enumerate(base) if s.finish_reason == "length")
    full_ids, full_text = base[row].token_ids, base[row].text
    stop = full_text[4:6]
    first = full_text.find(stop)  # char tokenizer: one token per character
    samples = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=12, temperature=0, stop=("zz", stop)).generate(
        _requests()
    )
    s = samples[row]
    assert s.finish_reason == "stop"
    assert s.token_ids == full_ids[: first + len(stop)]
    assert s.text == full_text[:first]
    # rows the stop string never appears in are untouched
    for plain, stopped in zip(base, samples, strict=True):
        if stop not in plain.text:
            assert stopped.token_ids == plain.token_ids and stopped.finish_reason == plain.finish_reason


@pytest.mark.parametrize("drop_finished", [True, False])
def test_pad_equal_to_eos_is_safe(tiny_llama, char_tokenizer, drop_finished):
    tok = build_char_tokenizer()
    tok.pad_token = tok.eos_token
    assert tok.pad_token_id == tok.eos_token_id
    kwargs = dict(max_new_tokens=12, temperature=0, drop_finished=drop_finished)
    expected = HFEngine(tiny_llama, char_tokenizer, **kwargs).generate(_requests())
    got = HFEngine(tiny_llama, tok, **kwargs).generate(_requests())
    assert [(s.token_ids, s.finish_reason) for s in got] == [(s.token_ids, s.finish_reason) for s in expected]


def test_top_k_one_is_greedy(tiny_llama, char_tokenizer):
    greedy = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=8, temperature=0).generate(_requests())
    topk1 = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=8, temperature=1.0, top_k=1).generate(_requests())
    assert [s.token_ids for s in topk1] == [s.token_ids for s in greedy]


def test_filter_logits():
    logits_BV = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]]))
    kept = lambda x: torch.isfinite(x).tolist()  # noqa: E731
    assert kept(filter_logits(logits_BV, top_k=2)) == [[True, True, False, False], [False, False, True, True]]
    assert kept(filter_logits(logits_BV, top_p=0.75)) == [[True, True, False, False], [False, False, True, True]]
    assert kept(filter_logits(logits_BV, top_p=0.81)) == [[True, True, True, False], [False, True, True, True]]
    assert kept(filter_logits(logits_BV, top_p=0.01)) == [[True, False, False, False], [False, False, False, True]]
    assert torch.equal(filter_logits(logits_BV), logits_BV)


def test_throughput_and_model_mode(tiny_llama, char_tokenizer):
    engine = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=5)
    tiny_llama.train()
    try:
        samples = engine.generate(_requests(k=2))
        assert tiny_llama.training, "generate restores the caller's train/eval mode"
    finally:
        tiny_llama.eval()
    assert engine.throughput.tokens == sum(s.num_tokens for s in samples)
    assert engine.throughput.sequences == len(samples) and engine.throughput.tokens_per_s > 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -1.0},
        {"top_p": 0.0},
        {"top_k": -1},
        {"max_new_tokens": 0},
        {"batch_size": 0},
        {"stop": "abc"},
        {"stop": ("",)},
    ],
)
def test_bad_arguments_raise(tiny_llama, char_tokenizer, kwargs):
    with pytest.raises(ValueError):
        HFEngine(tiny_llama, char_tokenizer, **kwargs)


def test_empty_prompt_raises(tiny_llama, char_tokenizer):
    with pytest.raises(ValueError, match="zero tokens"):
        HFEngine(tiny_llama, char_tokenizer).generate([Request(Prompt("e", ""), 1)])
