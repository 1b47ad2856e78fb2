"""The learner computes what the sampler sampled (issue 21 items 4 and 5): gradient accumulation over micro-batches
equals the full batch when completions are empty, and dropout is off in the learner so the on-policy PPO ratio is 1.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch

from reinforce_ada.sampling.configure import switch
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.dropout import disable_dropout
from reinforce_ada.training.trainer import Row, Trainer


def _cfg(model_dir: Path, run_dir: Path, **optim) -> TrainConfig:
    return apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 16, "eval_size": 2},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(run_dir), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"samples_per_round": 4, "max_samples": 8},
            "optim": optim,
        },
        "test",
    )


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_accumulation_with_empty_completions(model_dir, tmp_path, agg):
    lengths = [2, 0, 3, 0, 0, 0, 1]  # micro-batches of 2: [2, 0], [3, 0], [0, 0] (only empty), [1]
    rows = [Row([2, 5, 6], [7] * n, [-1.0] * n, float(i % 3 - 1) or 0.5, 1.0 + i % 2) for i, n in enumerate(lengths)]
    grads = []
    for mbs in (7, 2):
        tr = Trainer(_cfg(model_dir, tmp_path / f"r{mbs}", micro_batch_size=mbs, agg=agg), tensorboard=False)
        loss, _, _, ok = tr.accumulate(rows)
        assert ok and torch.isfinite(torch.tensor(loss))
        grads.append(torch.cat([p.grad.flatten() for p in tr.params]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    tr.opt.zero_grad(set_to_none=True)
    assert tr.accumulate([Row([2, 5], [], [], 1.0, 1.0)] * 3) == (0.0, 0.0, 0.0, True)  # nothing to learn from
    assert all(p.grad is None for p in tr.params)


@pytest.fixture(scope="module")
def gpt2_dropout_dir(tmp_path_factory, char_tokenizer) -> Path:
    """A GPT-2-style model with dropout 0.1 everywhere (embeddings, attention, residual)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = char_tokenizer
    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=128,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        initializer_range=0.5,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config)
    d = tmp_path_factory.mktemp("gpt2_dropout")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_learner_has_no_dropout_so_the_on_policy_ratio_is_one(gpt2_dropout_dir, tmp_path):
    cfg = _cfg(gpt2_dropout_dir, tmp_path / "run", old_logprobs="sampler")
    cfg = dataclasses.replace(cfg, strategy=switch(cfg.strategy, "uniform", n=4))
    tr = Trainer(cfg, tensorboard=False)
    assert tr.model.training and tr.model.config.resid_pdrop == 0.0
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)  # signal in every group
    m = tr.train_step()
    assert m["samples_trained"] > 0 and m["mismatch_logp_abs_max"] < 1e-4


def test_disable_dropout_covers_modules_attributes_and_config(tiny_llama, char_tokenizer):
    from transformers import LlamaForCausalLM

    config = copy.deepcopy(tiny_llama.config)
    config.attention_dropout = 0.3  # Llama passes this float to SDPA when training: no nn.Dropout module to find
    model = LlamaForCausalLM(config)
    model.load_state_dict(tiny_llama.state_dict())
    ids = torch.tensor([char_tokenizer.encode("<bos>12+34=46")])
    want = model.eval()(input_ids=ids).logits
    assert disable_dropout(model.train()) >= 2  # the attention layers' attribute and the config field
    assert torch.allclose(model(input_ids=ids).logits, want, atol=1e-6)
    assert disable_dropout(model) == 0
