"""HFStreamEngine and SlotEngine: continuous batching must not change what a row decodes (greedy = HFEngine =
model.generate), its log-probs (= teacher-forced), nor lose or duplicate a sample; and it drives `collect_streaming`
end to end."""

from __future__ import annotations

import copy
import math
from collections import Counter

import numpy as np
import pytest
import torch

from reinforce_ada.engines.hf import HFEngine
from reinforce_ada.engines.hf_stream import HFStreamEngine
from reinforce_ada.engines.slots import SlotEngine
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import left_pad, right_pad
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.types import Prompt, Request
from tests.helpers import teacher_forced_logprobs

PROMPTS = ["<bos>1+2=", "<bos>12*34=", "<bos>7", "<bos>99-1= 3", "<bos>5*5=", "<bos>0"]
"""Different lengths, so left padding and merging are exercised."""
N = 12  # max_new_tokens


@pytest.fixture(params=[HFStreamEngine, SlotEngine], ids=["hf", "slots"])
def Engine(request):
    """Every test runs on both continuous-batching engines: they share the protocol and must agree."""
    return request.param


def _requests(k: int = 1) -> list[Request]:
    return [Request(Prompt(f"p{i}", text), k) for i, text in enumerate(PROMPTS)]


def _drain(engine) -> list:
    out = []
    while not engine.idle():
        out += engine.poll()
    return out


@pytest.fixture(scope="module")
def greedy(tiny_llama, char_tokenizer) -> dict[str, list[int]]:
    """Greedy completion per prompt id, from HFEngine (checked against model.generate below)."""
    samples = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests())
    return {s.prompt_id: s.token_ids for s in samples}


def test_reference_is_model_generate(tiny_llama, char_tokenizer, greedy):
    tok = char_tokenizer
    ids_BP, mask_BP = left_pad([tok.encode(p) for p in PROMPTS], tok.pad_token_id)
    out = tiny_llama.generate(
        input_ids=ids_BP, attention_mask=mask_BP, do_sample=False, max_new_tokens=N, pad_token_id=tok.pad_token_id
    )
    for i, row in enumerate(out[:, ids_BP.shape[1] :].tolist()):
        end = row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
        assert greedy[f"p{i}"] == row[:end]
    assert any(r[-1] == tok.eos_token_id for r in greedy.values()), "some row should finish early (EOS)"
    assert any(len(r) == N for r in greedy.values()), "some row should run to the length cap"


@pytest.mark.parametrize(("slots", "steps_per_poll"), [(1, None), (3, None), (5, 2), (64, None)])
def test_greedy_matches_hf_engine_whatever_the_batching(
    Engine, tiny_llama, char_tokenizer, greedy, slots, steps_per_poll
):
    engine = Engine(
        tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=slots, steps_per_poll=steps_per_poll
    )
    # two waves, the second submitted mid-flight and in reverse order, so rows join a batch already decoding
    tickets = engine.submit(_requests(k=2))
    got = engine.poll()
    tickets += engine.submit(list(reversed(_requests(k=1))))
    widest = max(len(char_tokenizer.encode(p)) for p in PROMPTS) + N
    while not engine.idle():
        got += engine.poll()
        if Engine is HFStreamEngine:  # the left-padded layout trims leading columns nobody attends to
            assert engine.mask_RL.shape[1] <= widest, "leading columns nobody attends to are trimmed"
        assert len(engine.rows) <= slots
    assert sorted(s.index for s in got) == sorted(tickets) == list(range(18))
    for s in got:
        assert s.token_ids == greedy[s.prompt_id], (slots, s.prompt_id)
        assert s.finish_reason == ("eos" if s.token_ids[-1] == char_tokenizer.eos_token_id else "length")
        assert s.text == char_tokenizer.decode(s.token_ids, skip_special_tokens=True)
        assert s.num_tokens == len(s.token_ids) == len(s.logprobs) and s.reward is None
    assert engine.idle() and engine.poll() == [] and not engine.rows


def test_cancel_drops_queued_and_running_rows_only(Engine, tiny_llama, char_tokenizer, greedy):
    engine = Engine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=4, steps_per_poll=1)
    tickets = engine.submit(_requests(k=3))  # 18 rows, 4 running
    owner = dict(zip(tickets, [r.prompt.id for r in _requests() for _ in range(3)], strict=True))
    first = engine.poll() + engine.poll()
    running_p0 = sum(r.prompt_id == "p0" and not r.dead for r in engine.rows)
    queued_p0 = sum(r.prompt_id == "p0" for r in engine.queue)
    assert running_p0 > 0
    done_p0 = sum(s.prompt_id == "p0" for s in first)
    assert engine.cancel("p0") == running_p0 + queued_p0 == 3 - done_p0
    assert engine.cancel("p3") == 3  # all still queued
    assert engine.cancel("p3") == 0 and engine.cancel("nope") == 0
    rest = _drain(engine)
    got = first + rest
    assert all(s.prompt_id not in {"p0", "p3"} for s in rest)
    assert len({s.index for s in got}) == len(got)
    assert Counter(owner[s.index] for s in got) == Counter({**{f"p{i}": 3 for i in (1, 2, 4, 5)}, "p0": done_p0})
    for s in got:
        assert s.token_ids == greedy[s.prompt_id] and owner[s.index] == s.prompt_id
    assert engine.idle() and "p0" not in engine.refs


def test_cancel_everything_running_empties_the_batch(Engine, tiny_llama, char_tokenizer, greedy):
    engine = Engine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=8, steps_per_poll=1)
    engine.submit([Request(Prompt("a", PROMPTS[1]), 3)])
    engine.poll()
    assert engine.cancel("a") == 3 and engine.idle() and engine.poll() == []
    assert engine.wasted_tokens == 3
    engine.submit([Request(Prompt("b", PROMPTS[1]), 2)])  # the container cache is reused after emptying
    assert [s.token_ids for s in _drain(engine)] == [greedy["p1"]] * 2


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(0.0, 0, 1.0), (1.0, 0, 1.0), (0.7, 5, 0.9)])
def test_logprobs_match_teacher_forced_forward(Engine, tiny_llama, char_tokenizer, temperature, top_k, top_p):
    engine = Engine(
        tiny_llama,
        char_tokenizer,
        max_new_tokens=N,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        slots=5,
        seed=3,
    )
    samples = engine.generate(_requests(k=3))
    prompt_of = {f"p{i}": char_tokenizer.encode(p) for i, p in enumerate(PROMPTS)}
    logp_BT, mask_BT, _ = teacher_forced_logprobs(tiny_llama, char_tokenizer, prompt_of, samples, temperature)
    old_logp_BT, old_mask_BT = right_pad([s.logprobs for s in samples])
    assert torch.equal(mask_BT, old_mask_BT)
    assert torch.allclose(logp_BT, old_logp_BT, atol=1e-4)
    assert all(lp <= 0.0 and math.isfinite(lp) for s in samples for lp in s.logprobs)


def test_generate_matches_hf_engine_layout(Engine, tiny_llama, char_tokenizer):
    requests = [
        Request(Prompt("a", "<bos>1+1="), 2),
        Request(Prompt("b", "<bos>3"), 0),
        Request(Prompt("c", "<bos>4"), 3),
    ]
    kwargs = dict(max_new_tokens=6, temperature=0)
    ref = HFEngine(tiny_llama, char_tokenizer, **kwargs).generate(requests)
    got = Engine(tiny_llama, char_tokenizer, slots=2, **kwargs).generate(requests)
    assert [(s.prompt_id, s.index, s.token_ids, s.finish_reason) for s in got] == [
        (s.prompt_id, s.index, s.token_ids, s.finish_reason) for s in ref
    ]


def test_stop_strings_as_hf_engine(Engine, tiny_llama, char_tokenizer, greedy):
    text = char_tokenizer.decode(greedy["p1"], skip_special_tokens=True)
    kwargs = dict(max_new_tokens=N, temperature=0, stop=("zz", text[4:6]))
    ref = HFEngine(tiny_llama, char_tokenizer, **kwargs).generate(_requests())
    got = Engine(tiny_llama, char_tokenizer, slots=2, **kwargs).generate(_requests())
    assert "stop" in {s.finish_reason for s in got}
    assert [(s.token_ids, s.text, s.finish_reason) for s in got] == [
        (s.token_ids, s.text, s.finish_reason) for s in ref
    ]


def test_pad_equal_to_eos_and_from_engine(Engine, tiny_llama, char_tokenizer, greedy):
    from reinforce_ada.models.tiny import build_char_tokenizer

    tok = build_char_tokenizer()
    tok.pad_token = tok.eos_token
    base = HFEngine(tiny_llama, tok, max_new_tokens=N, temperature=0)
    engine = Engine.from_engine(base, slots=3)
    assert engine.pad_id == char_tokenizer.eos_token_id and engine.slots == 3 and engine.temperature == 0
    assert all(s.token_ids == greedy[s.prompt_id] for s in engine.generate(_requests(k=2)))


def test_seeded_determinism_and_state_dict(Engine, tiny_llama, char_tokenizer):
    def run(engine):
        return sorted((s.index, s.token_ids) for s in engine.generate(_requests(k=3)))

    make = lambda seed: Engine(tiny_llama, char_tokenizer, slots=7, seed=seed, max_new_tokens=8)  # noqa: E731
    a = make(1)
    state = a.state_dict()
    first = run(a)
    assert first == run(make(1))
    assert run(a) != first and run(make(2)) != first
    a.load_state_dict(state)
    assert run(a) == first


def test_each_prompt_prefilled_once_and_cache_bounded(Engine, tiny_llama, char_tokenizer, greedy):
    engine = Engine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=4)
    engine.generate(_requests(k=3))
    assert engine.prefilled_prompts == len(PROMPTS)
    engine.generate(_requests(k=1))  # LRU: finished prompts stay cached across calls
    assert engine.prefilled_prompts == len(PROMPTS)
    small = Engine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=4, max_cached_prompts=1)
    samples = small.generate(_requests(k=1) * 3)  # interleaved: each admission needs prompts evicted earlier
    assert len(small.prompt_kv) == 1 and small.prefilled_prompts > len(PROMPTS)
    assert all(s.token_ids == greedy[s.prompt_id] for s in samples)


def test_weight_update_invalidates_prompt_cache(Engine, tiny_llama, char_tokenizer):
    model = copy.deepcopy(tiny_llama)
    engine = Engine(model, char_tokenizer, max_new_tokens=N, temperature=0, slots=4)
    before = engine.generate(_requests())
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # an optimizer step, as far as the version counters can tell
    after = engine.generate(_requests())
    assert engine.prefilled_prompts == 2 * len(PROMPTS)
    fresh = Engine(model, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests())
    assert [s.token_ids for s in after] == [s.token_ids for s in fresh] != [s.token_ids for s in before]
    engine.submit(_requests())
    engine.poll()
    with torch.no_grad():
        next(model.parameters()).add_(0.0)
    with pytest.raises(RuntimeError, match="weights changed"):
        engine.poll()


def test_fused_optimizer_step_needs_sync_weights(Engine, tiny_llama, char_tokenizer):
    """Issue 21 item 3: a fused AdamW step moves the weights but not the version counters; `sync_weights` is what
    tells the engine, after which samples carry the new policy's log-probs."""
    model = copy.deepcopy(tiny_llama)
    engine = Engine(model, char_tokenizer, max_new_tokens=N, temperature=1.0, slots=4, steps_per_poll=2, seed=0)
    engine.generate(_requests())  # every prompt's KV is now cached
    engine.submit(_requests())
    engine.poll()
    with pytest.raises(RuntimeError, match="weights changed"):
        engine.sync_weights(model)  # rows still decoding
    for i in range(len(PROMPTS)):
        engine.cancel(f"p{i}")
    engine.generate(_requests())
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
    ids_BP, mask_BP = left_pad([char_tokenizer.encode(p) for p in PROMPTS], char_tokenizer.pad_token_id)
    model(input_ids=ids_BP, attention_mask=mask_BP).logits.logsumexp(-1).mean().backward()
    versions = [p._version for p in model.parameters()]
    opt.step()
    assert [p._version for p in model.parameters()] == versions, "fused AdamW moves no version counter"
    prompt_of = {f"p{i}": char_tokenizer.encode(p) for i, p in enumerate(PROMPTS)}

    def mismatch(samples) -> float:
        logp_BT, mask_BT, _ = teacher_forced_logprobs(model, char_tokenizer, prompt_of, samples, 1.0)
        return float((logp_BT - right_pad([s.logprobs for s in samples])[0]).abs()[mask_BT].max())

    assert mismatch(engine.generate(_requests(k=2))) > 1e-2  # the stale cache the counters cannot see
    engine.sync_weights(model)
    assert engine.weights_version == 1
    assert mismatch(engine.generate(_requests(k=2))) < 1e-4
    with pytest.raises(ConfigError, match="its own model"):
        engine.sync_weights(tiny_llama)


def test_throughput_and_model_mode(Engine, tiny_llama, char_tokenizer):
    engine = Engine(tiny_llama, char_tokenizer, max_new_tokens=5, slots=3)
    tiny_llama.train()
    try:
        samples = engine.generate(_requests(k=2))
        assert tiny_llama.training, "poll restores the caller's train/eval mode"
    finally:
        tiny_llama.eval()
    assert engine.throughput.tokens == sum(s.num_tokens for s in samples)
    assert engine.throughput.sequences == len(samples) == 12 and engine.throughput.tokens_per_s > 0


@pytest.mark.parametrize(
    "kwargs", [{"slots": 0}, {"steps_per_poll": 0}, {"max_cached_prompts": 0}, {"temperature": -1.0}]
)
def test_bad_arguments_raise(Engine, tiny_llama, char_tokenizer, kwargs):
    with pytest.raises(ValueError):
        Engine(tiny_llama, char_tokenizer, **kwargs)


def test_empty_prompt_raises(Engine, tiny_llama, char_tokenizer):
    with pytest.raises(ValueError, match="zero tokens"):
        Engine(tiny_llama, char_tokenizer).submit([Request(Prompt("e", ""), 1)])


def _digit_sum_parity(completion: str, answer: str) -> float:
    """A toy verifier with mixed outcomes on the random model's completions."""
    return float(sum(c.isdigit() for c in completion) % 2 == 0)


@pytest.mark.parametrize("opts", [{}, {"prefetch": True}, {"prefetch": True, "in_flight": "keep"}])
def test_collect_streaming_seq_end_to_end(Engine, tiny_llama, char_tokenizer, opts):
    cfg = strategy_config(name="seq", n=2, samples_per_round=3, max_samples=9, seed=0)
    prompts = [Prompt(f"q{i}", f"<bos>{i}+{i * 7}=", answer="") for i in range(8)]

    def run():
        engine = Engine(tiny_llama, char_tokenizer, max_new_tokens=6, slots=8, seed=5)
        sent = Counter()
        submit = engine.submit

        def counting_submit(requests):
            sent.update({r.prompt.id: r.k for r in requests})
            return submit(requests)

        engine.submit = counting_submit
        strategy = build_strategy(cfg)
        batch = collect_streaming(strategy, engine, prompts, verifier=_digit_sum_parity, **opts)
        return batch, strategy, engine, sent

    batch, strategy, engine, sent = run()
    led = batch.ledger
    assert engine.idle() and max(sent.values()) <= cfg.options.max_samples
    assert sorted(g.prompt.id for g in batch.groups) == sorted(p.id for p in prompts)
    assert led.samples_generated + led.extra["cancelled_samples"] == sum(sent.values()) == engine.next_ticket
    for g in batch.groups:
        assert len(g.pool_rewards) <= cfg.options.max_samples and len(g.samples) == min(
            cfg.options.n, len(g.pool_rewards)
        )
    for pool in strategy.pools.values():
        assert [s.index for s in pool] == list(range(len(pool)))  # contiguous: nothing lost or duplicated
    assert 0 < sum(r for g in batch.groups for r in g.pool_rewards) < sum(len(g.pool_rewards) for g in batch.groups)
    again = run()[0]
    assert [[s.token_ids for s in g.samples] for g in again.groups] == [
        [s.token_ids for s in g.samples] for g in batch.groups
    ]
    assert all(np.array_equal(a, b) for a, b in zip(again.advantages, batch.advantages, strict=True))
    if opts == {"prefetch": True}:
        assert led.extra["cancelled_samples"] > 0, "a retiring prompt's prefetched rows are cancelled"
