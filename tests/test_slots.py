"""SlotEngine beyond the shared engine tests (test_hf_stream.py runs those on it too): other Llama-family layouts
(grouped-query attention, q/k/v biases, q/k norms), LoRA, buffer growth, the fallback, and the trainer's choice."""

from __future__ import annotations

import pytest
import torch
import transformers

from reinforce_ada.engines import local_engine
from reinforce_ada.engines.hf import HFEngine
from reinforce_ada.engines.hf_stream import HFStreamEngine
from reinforce_ada.engines.slots import SlotEngine, supports_fused, why_not_fused
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.forward import right_pad
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.types import Prompt, Request
from tests.helpers import teacher_forced_logprobs

PROMPTS = ["<bos>1+2=", "<bos>12*34=", "<bos>7", "<bos>99-1= 3"]
N = 10


def _requests(k: int = 1, prompts=PROMPTS) -> list[Request]:
    return [Request(Prompt(f"p{i}", text), k) for i, text in enumerate(prompts)]


def _random_lm(kind: str, tok, **extra):
    """A seeded random causal LM of `kind` with 4 query heads over 2 key/value heads (grouped-query attention)."""
    cls = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "mistral": "Mistral", "gpt2": "GPT2"}[kind]
    common = dict(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    if kind == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=64, **common)
        model_cls = transformers.GPT2LMHeadModel
    else:
        config = getattr(transformers, f"{cls}Config")(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            initializer_range=0.5,
            **common,
            **extra,
        )
        model_cls = getattr(transformers, f"{cls}ForCausalLM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        return model_cls(config).eval()


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("llama", {}),
        ("llama", {"attention_bias": True}),
        ("qwen2", {}),
        ("qwen3", {}),
        ("mistral", {"sliding_window": None}),
    ],
)
def test_fused_decode_matches_hf_forward(char_tokenizer, kind, extra):
    model = _random_lm(kind, char_tokenizer, **extra)
    assert supports_fused(model), why_not_fused(model)
    ref = HFEngine(model, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests(2))
    got = SlotEngine(model, char_tokenizer, max_new_tokens=N, temperature=0, slots=3).generate(_requests(2))
    assert [s.token_ids for s in got] == [s.token_ids for s in ref]
    sampled = SlotEngine(model, char_tokenizer, max_new_tokens=N, temperature=1.0, slots=5, seed=2).generate(
        _requests(3)
    )
    prompt_of = {f"p{i}": char_tokenizer.encode(p) for i, p in enumerate(PROMPTS)}
    logp_BT, mask_BT, _ = teacher_forced_logprobs(model, char_tokenizer, prompt_of, sampled, 1.0)
    old_BT, old_mask_BT = right_pad([s.logprobs for s in sampled])
    assert torch.equal(mask_BT, old_mask_BT) and torch.allclose(logp_BT, old_BT, atol=1e-4)


def test_lora_wrapped_model(tiny_llama, char_tokenizer):
    peft = pytest.importorskip("peft")
    import copy

    model = peft.get_peft_model(
        copy.deepcopy(tiny_llama), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    ).eval()
    ref = HFEngine(model, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests())
    got = SlotEngine(model, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests())
    base = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests())
    assert [s.token_ids for s in got] == [s.token_ids for s in ref] != [s.token_ids for s in base]


def test_buffer_grows_for_more_rows_and_a_longer_prompt_mid_flight(tiny_llama, char_tokenizer):
    long_prompt = "<bos>" + "1234567890+" * 3 + "="
    prompts = [PROMPTS[2], long_prompt]
    ref = HFEngine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0).generate(_requests(1, prompts))
    engine = SlotEngine(tiny_llama, char_tokenizer, max_new_tokens=N, temperature=0, slots=4, steps_per_poll=1)
    engine.submit(_requests(2, prompts[:1]))
    got = engine.poll()
    rows, capacity = engine.kv.shape[2], engine.kv.shape[4]
    assert rows == 2, "the buffer holds the rows running, not every slot"
    engine.submit([Request(Prompt("p1", long_prompt), 2)])
    while not engine.idle():
        got += engine.poll()
    assert engine.kv.shape[4] > capacity and engine.kv.shape[2] == 4
    want = {s.prompt_id: s.token_ids for s in ref}
    assert sorted(s.prompt_id for s in got) == ["p0", "p0", "p1", "p1"]
    assert all(s.token_ids == want[s.prompt_id] for s in got)


def test_unsupported_models_fall_back_or_raise(char_tokenizer):
    gpt2 = _random_lm("gpt2", char_tokenizer)
    assert "gpt2" in why_not_fused(gpt2)
    with pytest.raises(ConfigError, match="gpt2.*HFStreamEngine"):
        SlotEngine(gpt2, char_tokenizer)
    windowed = _random_lm("mistral", char_tokenizer, sliding_window=8)
    assert "sliding" in why_not_fused(windowed)
    kw = dict(slots=4, batch_size=8, max_new_tokens=4)
    assert type(local_engine(gpt2, char_tokenizer, decode="auto", streaming=True, **kw)) is HFStreamEngine
    assert type(local_engine(gpt2, char_tokenizer, decode="auto", streaming=False, **kw)) is HFEngine
    with pytest.raises(ConfigError, match="gpt2"):
        local_engine(gpt2, char_tokenizer, decode="fused", streaming=True, **kw)
    with pytest.raises(ValueError, match="decode"):
        local_engine(gpt2, char_tokenizer, decode="fast", streaming=True, **kw)


def test_local_engine_choice(tiny_llama, char_tokenizer):
    kw = dict(slots=4, batch_size=8, max_new_tokens=4)
    assert type(local_engine(tiny_llama, char_tokenizer, decode="auto", streaming=False, **kw)) is SlotEngine
    assert type(local_engine(tiny_llama, char_tokenizer, decode="hf", streaming=True, **kw)) is HFStreamEngine
    assert type(local_engine(tiny_llama, char_tokenizer, decode="hf", streaming=False, **kw)) is HFEngine


@pytest.mark.parametrize(
    ("strategy", "generation", "expected"),
    [
        ({"name": "seq"}, {}, True),
        ({"name": "est"}, {}, True),
        ({"name": "uniform"}, {}, False),
        ({"name": "dynamic"}, {}, False),
        ({"name": "seq"}, {"streaming": False}, False),
        ({"name": "uniform"}, {"streaming": True}, True),
        ({"name": "seq"}, {"engine": "vllm"}, True),  # vLLM streams too (submit/poll/cancel)
    ],
)
def test_streaming_is_the_default_for_seq_and_est(strategy, generation, expected):
    cfg = apply_overrides(TrainConfig(), {"strategy": strategy, "generation": generation}, "test")
    assert cfg.streaming is expected


def test_bad_decode_names_the_field():
    with pytest.raises(ConfigError, match=r"generation.decode='fast'.*auto"):
        apply_overrides(TrainConfig(), {"generation": {"decode": "fast"}}, "test")
