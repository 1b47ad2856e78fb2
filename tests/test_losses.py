from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch

from reinforce_ada.sampling.configure import switch
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.dropout import disable_dropout
from reinforce_ada.training.losses import AGGREGATIONS, aggregation_units, policy_loss
from reinforce_ada.training.trainer import Row, Trainer


def _reference(
    logp, old, adv, mask, *, weight, clip_low, clip_high, dual_clip, agg, entropy, entropy_coef, ref, kl_coef
) -> float:
    """A plain Python per-token loop over nested lists."""

    def aggregate(values):
        rows = [[v for v, m in zip(vs, ms, strict=True) if m] for vs, ms in zip(values, mask, strict=True)]
        if agg == "token-mean":
            return sum(sum(r) for r in rows) / max(1, sum(len(r) for r in rows))
        seqs = [sum(r) / len(r) if agg == "seq-mean-token-mean" else sum(r) for r in rows if r]
        return sum(seqs) / max(1, len(seqs))

    pg = []
    for b in range(len(logp)):
        a = adv[b] * (weight[b] if weight is not None else 1.0)
        row = []
        for t in range(len(logp[b])):
            r = math.exp(logp[b][t] - old[b][t])
            loss = max(-a * r, -a * min(max(r, 1 - clip_low), 1 + clip_high))
            if dual_clip is not None and a < 0:
                loss = min(loss, -a * dual_clip)
            row.append(loss)
        pg.append(row)
    total = aggregate(pg)
    if entropy is not None:
        total -= entropy_coef * aggregate(entropy)
    if ref is not None:
        kl = [
            [math.exp(rr - lp) - (rr - lp) - 1 for rr, lp in zip(rs, ls, strict=True)]
            for rs, ls in zip(ref, logp, strict=True)
        ]
        total += kl_coef * aggregate(kl)
    return total


def _inputs(seed: int, B: int = 6, T: int = 7):
    g = torch.Generator().manual_seed(seed)
    logp_BT = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    # log-ratios from -3 to 3: ratios from 0.05 to 20 reach every clip region, dual clip included
    old_logp_BT = logp_BT - (torch.rand(B, T, generator=g, dtype=torch.float64) * 6 - 3)
    adv_B = torch.randn(B, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask_BT = torch.arange(T) < lengths.unsqueeze(-1)
    weight_B = torch.rand(B, generator=g, dtype=torch.float64) * 2
    entropy_BT = torch.rand(B, T, generator=g, dtype=torch.float64) * 2
    ref_logp_BT = logp_BT + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.3
    return logp_BT, old_logp_BT, adv_B, mask_BT, weight_B, entropy_BT, ref_logp_BT


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("extras", [False, True])
def test_matches_python_loop(agg, seed, extras):
    logp, old, adv, mask, weight, entropy, ref = _inputs(seed)
    kwargs = dict(clip_low=0.2, clip_high=0.28, dual_clip=3.0, agg=agg)
    if extras:
        kwargs.update(weight_B=weight, entropy_BT=entropy, entropy_coef=0.01, ref_logp_BT=ref, kl_coef=0.1)
    out = policy_loss(logp, old, adv, mask, **kwargs)
    want = _reference(
        logp.tolist(),
        old.tolist(),
        adv.tolist(),
        mask.tolist(),
        weight=weight.tolist() if extras else None,
        clip_low=0.2,
        clip_high=0.28,
        dual_clip=3.0,
        agg=agg,
        entropy=entropy.tolist() if extras else None,
        entropy_coef=0.01,
        ref=ref.tolist() if extras else None,
        kl_coef=0.1,
    )
    assert out.loss.item() == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_inputs_cover_every_clip_region():
    logp, old, adv, mask, *_ = _inputs(0)
    out = policy_loss(logp, old, adv, mask, dual_clip=3.0)
    assert out.clip_frac_low > 0 and out.clip_frac_high > 0 and out.dual_clip_frac > 0
    assert out.clip_frac == pytest.approx(out.clip_frac_low + out.clip_frac_high) and out.clip_frac < 1


def _one_token(log_ratio: float, adv: float, **kwargs):
    logp_BT = torch.tensor([[log_ratio]], requires_grad=True)
    out = policy_loss(logp_BT, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1, dtype=torch.bool), **kwargs)
    out.loss.backward()
    return out, logp_BT.grad.item()


@pytest.mark.parametrize(
    ("ratio", "adv", "loss", "has_grad"),
    [
        (1.1, 1.0, -1.1, True),  # inside the trust region
        (1.5, 1.0, -1.28, False),  # above 1 + clip_high with A > 0: clipped
        (0.5, 1.0, -0.5, True),  # below 1 - clip_low with A > 0: the min keeps the unclipped term
        (0.5, -1.0, 0.8, False),  # below 1 - clip_low with A < 0: clipped
        (5.0, -1.0, 5.0, True),  # above 1 + clip_high with A < 0: unclipped (the pessimistic side)
        (50.0, -2.0, 20.0, False),  # past dual_clip with A < 0: capped at dual_clip * |A|
        (50.0, 2.0, -2.56, False),  # dual clip never touches A > 0
    ],
)
def test_clip_regions(ratio, adv, loss, has_grad):
    out, grad = _one_token(math.log(ratio), adv)
    assert out.loss.item() == pytest.approx(loss, rel=1e-5)
    assert (grad != 0) == has_grad


def test_dual_clip_can_be_disabled():
    out, grad = _one_token(math.log(50.0), -2.0, dual_clip=None)
    assert out.loss.item() == pytest.approx(100.0, rel=1e-5) and grad != 0 and out.dual_clip_frac == 0
    with pytest.raises(ValueError, match="dual_clip"):
        _one_token(0.0, 1.0, dual_clip=1.0)


def test_weights_scale_the_advantage():
    logp, old, adv, mask, weight, *_ = _inputs(3)
    for agg in AGGREGATIONS:
        weighted = policy_loss(logp, old, adv, mask, weight_B=weight, agg=agg).loss
        assert torch.allclose(weighted, policy_loss(logp, old, adv * weight, mask, agg=agg).loss)


def test_on_policy_stats_and_gradient():
    logp, _, adv, mask, _, entropy, _ = _inputs(4)
    logp = logp.clone().requires_grad_(True)
    entropy = entropy.clone().requires_grad_(True)
    out = policy_loss(logp, logp.detach(), adv, mask, entropy_BT=entropy, entropy_coef=0.1)
    assert out.ratio_mean == pytest.approx(1.0) and out.approx_kl == pytest.approx(0.0, abs=1e-12)
    assert out.clip_frac == 0.0 and out.kl == 0.0 and out.entropy > 0
    out.loss.backward()
    # on-policy token-mean: d loss / d logp = -A / n_tokens on valid tokens, 0 on padding
    want_BT = torch.where(mask, -adv.unsqueeze(-1).expand_as(logp) / mask.sum(), torch.zeros(()).double())
    assert torch.allclose(logp.grad, want_BT)
    assert torch.allclose(entropy.grad, torch.where(mask, -0.1 / mask.sum(), torch.zeros(()).double()))
    assert set(out.metrics()) >= {"loss/loss", "loss/clip_frac", "loss/approx_kl", "loss/entropy", "loss/kl"}


def test_padding_may_hold_garbage():
    logp, old, adv, mask, *_ = _inputs(5)
    logp = logp.masked_fill(~mask, float("nan"))
    old = old.masked_fill(~mask, float("inf"))
    for agg in AGGREGATIONS:
        assert torch.isfinite(policy_loss(logp, old, adv, mask, agg=agg).loss)


def test_bad_arguments_raise():
    logp, old, adv, mask, weight, entropy, ref = _inputs(6)
    with pytest.raises(ValueError, match=r"unknown loss aggregation 'bogus'.*seq-mean-token-mean"):
        policy_loss(logp, old, adv, mask, agg="bogus")
    with pytest.raises(ValueError, match="old_logp_BT must have shape"):
        policy_loss(logp, old[:, :-1], adv, mask)
    with pytest.raises(ValueError, match="adv_B must have shape"):
        policy_loss(logp, old, adv[:-1], mask)
    with pytest.raises(ValueError, match="weight_B must have shape"):
        policy_loss(logp, old, adv, mask, weight_B=weight.unsqueeze(-1))
    with pytest.raises(ValueError, match="2-D"):
        policy_loss(logp[0], old[0], adv, mask[0])
    with pytest.raises(ValueError, match="entropy_coef"):
        policy_loss(logp, old, adv, mask, entropy_coef=0.1)
    with pytest.raises(ValueError, match="kl_coef"):
        policy_loss(logp, old, adv, mask, kl_coef=0.1)
    with pytest.raises(ValueError, match="clip_low"):
        policy_loss(logp, old, adv, mask, clip_low=1.0)


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
def test_accumulation_with_empty_completions_equals_the_full_batch(agg):
    """Issue 21 item 5: micro-batches weighted by `aggregation_units` give the full-batch gradient when some
    completions are empty, and a micro-batch of only empty completions is skipped (it has no units)."""
    lengths = [3, 0, 5, 0, 0, 0, 2, 4]  # micro-batches of 2 and of 3 each include one with only empty completions
    B, T = len(lengths), max(lengths)
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(T) < torch.tensor(lengths).unsqueeze(-1)
    base = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    old = base - (torch.rand(B, T, generator=g, dtype=torch.float64) - 0.5)
    adv, ent0 = torch.randn(B, generator=g, dtype=torch.float64), torch.rand(B, T, generator=g, dtype=torch.float64)
    ref = base + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.3
    kw = dict(agg=agg, entropy_coef=0.1, kl_coef=0.05)

    def grads(size: int) -> tuple[torch.Tensor, torch.Tensor, float]:
        logp, ent = base.clone().requires_grad_(), ent0.clone().requires_grad_()
        total, skipped = aggregation_units(agg, lengths), 0
        loss_sum = 0.0
        for lo in range(0, B, size):
            sl = slice(lo, lo + size)
            units = aggregation_units(agg, lengths[sl])
            if units == 0:
                skipped += 1
                continue
            res = policy_loss(logp[sl], old[sl], adv[sl], mask[sl], entropy_BT=ent[sl], ref_logp_BT=ref[sl], **kw)
            (res.loss * units / total).backward()
            loss_sum += float(res.loss.detach()) * units / total
        assert skipped == (0 if size == B else {1: 4, 2: 1, 3: 1}[size])
        return logp.grad, ent.grad, loss_sum

    full_logp, full_ent, full_loss = grads(B)
    for size in (1, 2, 3):
        logp_grad, ent_grad, loss = grads(size)
        assert torch.allclose(logp_grad, full_logp, atol=1e-12) and torch.allclose(ent_grad, full_ent, atol=1e-12)
        assert loss == pytest.approx(full_loss, abs=1e-12)
    assert aggregation_units(agg, [0, 0]) == 0
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregation_units("bogus", [1])


# -- learner exactness ------------------------------------------------------------------------------------------------
# The learner computes what the sampler sampled (issue 21 items 4 and 5): gradient accumulation over micro-batches
# equals the full batch when completions are empty, and dropout is off in the learner so the on-policy PPO ratio is 1.
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
