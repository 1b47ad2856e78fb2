"""The engine contract (`engines.protocol`) over every registered engine, and a new engine from outside the package
registered with one line and used by the trainer and evaluation with no other edit (issue 20)."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util

import pytest
import torch

from reinforce_ada.engines import ENGINES, Capabilities, EngineSpec, RolloutEngine, build_engine, engine_class
from reinforce_ada.engines.protocol import OPTIONAL_METHODS
from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt, Request

REQUESTS = [Request(Prompt("a", "<bos>1+2="), 3), Request(Prompt("b", "<bos>7"), 0), Request(Prompt("c", "<bos>45"), 2)]
SPEC = EngineSpec(max_new_tokens=5, temperature=1.0, seed=1, slots=4, batch_size=4)


def _registered() -> list[str]:
    return sorted(ENGINES)


def _build(name: str, model, tokenizer, model_dir, **spec) -> RolloutEngine:
    if engine_class(name).capabilities.own_weights and name == "vllm" and importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    return build_engine(
        name, dataclasses.replace(SPEC, **spec), model=model, tokenizer=tokenizer, model_path=str(model_dir)
    )


def _tokens(samples) -> list[tuple[str, int, list[int]]]:
    return [(s.prompt_id, s.index, s.token_ids) for s in samples]


@pytest.mark.parametrize("name", _registered())
@pytest.mark.parametrize("streaming", [False, True])
def test_every_registered_engine_keeps_the_contract(name, streaming, tiny_llama, char_tokenizer, model_dir):
    check_contract(name, streaming, tiny_llama, char_tokenizer, model_dir)


def check_contract(name, streaming, tiny_llama, char_tokenizer, model_dir) -> None:
    model = copy.deepcopy(tiny_llama)
    cls = engine_class(name)
    assert isinstance(cls.capabilities, Capabilities) and callable(cls.build)
    engine = _build(name, model, char_tokenizer, model_dir, streaming=streaming)
    assert isinstance(engine, RolloutEngine) and isinstance(engine.pad_id, int)
    caps = engine.capabilities
    for flag, methods in OPTIONAL_METHODS.items():
        if getattr(caps, flag):
            assert all(callable(getattr(engine, m, None)) for m in methods), (name, flag)
    if streaming:
        assert caps.streaming, f"{name}: spec.streaming=True must give an engine that streams"
    # generate: k samples per request, request order, index 0..k-1
    samples = engine.generate(REQUESTS)
    assert [(s.prompt_id, s.index) for s in samples] == [("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1)]
    assert all(len(s.token_ids) == len(s.logprobs) == s.num_tokens <= 5 for s in samples)
    prompt_len = {
        r.prompt.id: len(char_tokenizer(r.prompt.text, add_special_tokens=False)["input_ids"]) for r in REQUESTS
    }
    assert all(s.prompt_tokens == prompt_len[s.prompt_id] for s in samples), name  # the bill's input side
    capped = engine.generate([Request(Prompt("a", "<bos>1+2="), 4, max_tokens=1)])  # a request's own cap
    assert all(s.num_tokens <= 1 and (s.num_tokens < 1 or s.finish_reason in ("length", "eos")) for s in capped), name
    # reseed: the same seed draws the same samples; state_dict / load_state_dict resume the stream
    engine.reseed(7)
    first = _tokens(engine.generate(REQUESTS))
    state = engine.state_dict()
    second = _tokens(engine.generate(REQUESTS))
    engine.reseed(7)
    assert _tokens(engine.generate(REQUESTS)) == first
    engine.load_state_dict(state)
    assert _tokens(engine.generate(REQUESTS)) == second
    # a greedy sibling over the same weights, without touching this engine's settings
    greedy = engine.with_sampling(temperature=0.0, seed=0)
    assert _tokens(greedy.generate(REQUESTS)) == _tokens(greedy.generate(REQUESTS))
    engine.reseed(7)
    assert _tokens(engine.generate(REQUESTS)) == first, "with_sampling must not change the engine it came from"
    # new weights: after sync_weights every sample comes from them
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.3)
    engine.sync_weights(model)
    fresh = _build(name, model, char_tokenizer, model_dir, streaming=streaming, temperature=0.0)
    assert _tokens(engine.with_sampling(temperature=0.0, seed=0).generate(REQUESTS)) == _tokens(
        fresh.generate(REQUESTS)
    )
    if caps.streaming:
        tickets = engine.submit(REQUESTS)
        got = []
        while not engine.idle():
            got += engine.poll()
        assert sorted(s.index for s in got) == sorted(tickets) and len(tickets) == 5
        engine.submit(REQUESTS[:1])
        assert engine.cancel("a") == 3 and engine.idle()
    if caps.prompt_cache:
        engine.clear_prompt_cache()
    if caps.step_metrics:
        assert isinstance(engine.step_metrics(), dict)


def test_an_engine_without_its_declarations_fails_loudly(monkeypatch):
    monkeypatch.setitem(ENGINES, "bare", "reinforce_ada.types:Sample")  # a class that is no engine
    with pytest.raises(ConfigError, match=r"engine 'bare' .*must declare `capabilities = Capabilities"):
        engine_class("bare")


def test_unknown_engine_names_the_registered_ones(tiny_llama, char_tokenizer):
    with pytest.raises(ConfigError, match=r"unknown engine 'nope'; choose one of \['hf', 'vllm'"):
        build_engine("nope", SPEC, model=tiny_llama, tokenizer=char_tokenizer)
    with pytest.raises(ConfigError, match="samples from the in-process model"):
        build_engine("hf", SPEC, model=None, tokenizer=char_tokenizer)


@pytest.fixture
def mine(monkeypatch):
    """The external engine, registered with its one line."""
    monkeypatch.setitem(ENGINES, "mine", "tests.external_engine:MyEngine")
    return engine_class("mine")


def test_external_engine_keeps_the_contract(mine, tiny_llama, char_tokenizer, model_dir):
    check_contract("mine", False, tiny_llama, char_tokenizer, model_dir)
    with pytest.raises(ConfigError, match="'mine' does not stream.*generation.streaming"):
        build_engine("mine", dataclasses.replace(SPEC, streaming=True), model=tiny_llama, tokenizer=char_tokenizer)


def test_external_engine_trains_and_evaluates(mine, model_dir, tmp_path):
    from reinforce_ada.evaluation.loading import load_engines
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 16, "eval_size": 2},
            "generation": {"max_new_tokens": 4, "engine": "mine"},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"name": "uniform", "n": 4},
        },
        "test",
    )
    tr = Trainer(cfg, tensorboard=False)
    assert type(tr.engine) is mine
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m = tr.train_step()
    assert m["samples_generated"] == 16 and m["samples_trained"] > 0
    tok, eng, greedy = load_engines(model_dir, engine="mine", threads=1, max_new_tokens=4, seed=0)
    assert type(eng) is type(greedy) is mine and greedy.temperature == 0.0
