"""Sampler/learner mismatch: old log-probs recomputed by the learner, importance weights (TRL's four modes, closed
form), the per-step mismatch metrics, the defaults per precision and engine, and bad values named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.experience import ExperienceBuffer, experience_batch, replay_buffer
from reinforce_ada.training.losses import importance_weights, policy_loss
from reinforce_ada.training.replay import ReplayBuffer
from reinforce_ada.training.replay_config import ReplayConfig
from reinforce_ada.training.trainer import Trainer
from reinforce_ada.types import Group, Prompt, Sample
from tests.helpers import train_config


def cfg_for(model_dir: Path, run_dir: Path, **sections) -> TrainConfig:
    base = {
        "model": {"path": str(model_dir), "threads": 1},
        "task": {"train_size": 256, "eval_size": 4},
        "generation": {"max_new_tokens": 4},
        "run": {"run_dir": str(run_dir), "steps": 2, "batch_size": 4, "eval_every": 0, "progress": False},
        "strategy": {"name": "uniform", "n": 8},
    }
    for sec, values in sections.items():
        base[sec] = {**base.get(sec, {}), **values}
    return apply_overrides(TrainConfig(), base, "test")


def test_importance_weights_closed_form():
    learner = torch.tensor([[0.0, -1.0, -2.0], [-0.5, 0.0, 0.0]])
    sampler = torch.tensor([[-1.0, -1.0, -1.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    # per token: w = exp(learner - sampler) = e, 1, e^-1 ; row 2: 1 (padding gets 0)
    w, share = importance_weights(learner, sampler, mask, mode="token_truncate", cap=2.0)
    assert torch.allclose(w, torch.tensor([[2.0, 1.0, math.exp(-1)], [1.0, 0.0, 0.0]]))
    assert share == pytest.approx(1 / 4)
    w, share = importance_weights(learner, sampler, mask, mode="token_mask", cap=2.0)
    assert torch.allclose(w, torch.tensor([[0.0, 1.0, math.exp(-1)], [1.0, 0.0, 0.0]])) and share == pytest.approx(
        1 / 4
    )
    # per sequence: exp(1 + 0 - 1) = 1 for row 1, exp(0) = 1 for row 2
    w, share = importance_weights(learner, sampler, mask, mode="sequence_mask", cap=2.0)
    assert torch.allclose(w, mask.float()) and share == 0.0
    learner2 = learner + torch.tensor([[1.0], [0.0]])  # row 1's sequence ratio becomes e^3 > cap
    w, share = importance_weights(learner2, sampler, mask, mode="sequence_truncate", cap=2.0)
    assert torch.allclose(w[0], torch.full((3,), 2.0)) and share == pytest.approx(3 / 4)
    w, _ = importance_weights(learner2, sampler, mask, mode="sequence_mask", cap=2.0)
    assert torch.equal(w[0], torch.zeros(3)) and w[1, 0] == 1.0
    w, share = importance_weights(learner, sampler, mask, mode="none", cap=2.0)
    assert torch.equal(w, torch.ones_like(w)) and share == 0.0
    with pytest.raises(ConfigError, match="token_truncate"):
        importance_weights(learner, sampler, mask, mode="token", cap=2.0)


def test_policy_loss_multiplies_each_token_by_its_weight():
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(3, 5, generator=g)).requires_grad_()
    old = logp.detach().clone()
    adv = torch.tensor([1.0, -0.5, 2.0])
    mask = torch.ones(3, 5, dtype=torch.bool)
    w = torch.rand(3, 5, generator=g)
    weighted = policy_loss(logp, old, adv, mask, is_weight_BT=w, dual_clip=None)
    (grad_w,) = torch.autograd.grad(weighted.loss, logp)
    # on-policy (ratio 1): d loss / d logp = -A * w / tokens
    assert torch.allclose(grad_w, -adv[:, None] * w / 15, atol=1e-6)


def test_defaults_follow_precision_and_engine(model_dir, tmp_path):
    fp32 = cfg_for(model_dir, tmp_path / "a")
    assert (fp32.old_logprobs, fp32.is_correction) == ("sampler", "none")
    bf16 = cfg_for(model_dir, tmp_path / "a", model={"bf16": True})
    assert (bf16.old_logprobs, bf16.is_correction) == ("recompute", "token_truncate")
    vllm = apply_overrides(TrainConfig(), {"generation": {"engine": "vllm"}}, "test")
    assert vllm.old_logprobs == "recompute"
    chosen = cfg_for(model_dir, tmp_path / "a", optim={"old_logprobs": "recompute", "is_correction": "sequence_mask"})
    assert (chosen.old_logprobs, chosen.is_correction) == ("recompute", "sequence_mask")


@pytest.mark.parametrize(
    ("optim", "needle"),
    [
        ({"old_logprobs": "learner"}, "optim.old_logprobs='learner'"),
        ({"is_correction": "token"}, "optim.is_correction='token'"),
        ({"is_cap": 1.0}, "optim.is_cap=1.0"),
        ({"is_cap": float("nan")}, "optim.is_cap=nan"),
        ({"old_logprobs": "sampler", "is_correction": "token_mask"}, "needs optim.old_logprobs='recompute'"),
    ],
)
def test_bad_values_are_named(optim, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        apply_overrides(TrainConfig(), {"optim": optim}, "test")


def test_fp32_sampler_matches_learner_and_reports_the_mismatch(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "fp32"), tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    m = tr.train_step()
    # our engines sample in fp32 with the learner's own modules: the PPO ratio starts at 1
    assert m["mismatch_logp_abs_mean"] < 1e-4 and m["mismatch_logp_abs_max"] < 1e-3
    assert "is_affected_token_share" not in m


def test_bf16_recomputes_old_logprobs_and_corrects(model_dir, tmp_path):
    cfg = cfg_for(model_dir, tmp_path / "bf16", model={"bf16": True}, optim={"is_cap": 1.001})
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = lambda completion, answer: float(len(completion) % 2 == 0)
    seen: dict = {}
    recompute = tr.recompute_old

    def spy(rows, drift):
        recompute(rows, drift)
        seen["rows"] = rows

    tr.recompute_old = spy
    m = tr.train_step()
    rows = seen["rows"]
    assert all(r.old_logp is not None and len(r.old_logp) == len(r.sampler_logp) for r in rows)
    diff = np.concatenate([np.abs(np.subtract(r.old_logp, r.sampler_logp)) for r in rows])
    # the fp32 sampler and the bf16 learner disagree a little, and the metrics say by how much
    assert 0 < m["mismatch_logp_abs_mean"] == pytest.approx(diff.mean(), rel=1e-5)
    assert m["mismatch_logp_abs_max"] == pytest.approx(diff.max(), rel=1e-5)
    # with a cap of 1.001 every token whose ratio exceeds it is truncated
    expected = np.mean(np.concatenate([np.exp(np.subtract(r.old_logp, r.sampler_logp)) for r in rows]) > 1.001)
    assert m["is_affected_token_share"] == pytest.approx(expected, abs=1e-6)
    assert np.isfinite(m["loss"]) and m["skipped_update"] == 0


def test_engine_auto_picks_vllm_only_when_installed_and_on_cuda(monkeypatch):
    import importlib.util

    import torch

    from reinforce_ada.engines.config import resolve_engine

    assert TrainConfig().generation.engine == "auto"
    real_find = importlib.util.find_spec
    for installed, cuda, device, want in [
        (False, True, "auto", "hf"),
        (True, False, "auto", "hf"),
        (True, True, "auto", "vllm"),
        (True, True, "cuda", "vllm"),
        (True, True, "cpu", "hf"),
    ]:
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda n, *a, i=installed: (object() if i else None) if n == "vllm" else real_find(n, *a),
        )
        monkeypatch.setattr(torch.cuda, "is_available", lambda c=cuda: c)
        assert resolve_engine("auto", device) == want
        cfg = apply_overrides(TrainConfig(), {"model": {"device": device}}, "t")
        assert cfg.engine == want and cfg.old_logprobs == ("recompute" if want == "vllm" else "sampler")
    assert resolve_engine("hf", "cuda") == "hf" and resolve_engine("vllm", "cpu") == "vllm"


# -- experience -------------------------------------------------------------------------------------------------------
# Experience replay with a staleness cap (`[replay] mode = "samples"`, `training.experience`): each step's trained
# groups are trained again in the next `max_age` steps, off-policy corrected, their tracker advantages computed with
# the value from before their own samples; counted as trained, not generated; resumed identically.
def group(pid: str, rewards: list[float]) -> Group:
    samples = [Sample(prompt_id=pid, text="", token_ids=[1, 2], logprobs=[-0.5, -0.5], reward=r) for r in rewards]
    return Group(Prompt(pid, pid), samples, list(rewards))


def test_the_buffer_keeps_what_the_staleness_cap_allows_and_round_trips():
    buf = ExperienceBuffer(max_age=2)
    buf.add(0, [group("a", [1.0, 0.0])])
    buf.add(1, [group("b", [0.0, 0.0])])
    assert buf.due(0) == [] and [g.prompt.id for g in buf.due(1)] == ["a"]
    assert [g.prompt.id for g in buf.due(2)] == ["a", "b"] and [g.prompt.id for g in buf.due(3)] == ["b"]
    assert buf.due(4) == [] and buf.steps == []  # older than the cap: gone
    buf.add(5, [group("c", [1.0])])
    no_logprobs = Group(Prompt("d", "d"), [Sample(prompt_id="d", text="", reward=1.0)], [1.0])
    buf.add(5, [no_logprobs])  # nothing to correct off-policy with: never stored
    twin = ExperienceBuffer(max_age=2)
    twin.load_state_dict(json.loads(json.dumps(buf.state_dict())))
    assert twin.state_dict() == buf.state_dict() and [g.prompt.id for g in twin.due(6)] == ["c"]


def test_a_replayed_group_keeps_the_tracker_baseline_from_before_its_own_samples():
    s = build_strategy(strategy_config("spo", n=2, select="none", batch_normalize="none"))
    p = Prompt("a", "a")
    fresh = group("a", [1.0, 1.0])
    fresh.baseline = v0 = s.memory.value(p)  # as `ledger.finish` sets it: the value before the group's samples
    s.memory.record(p, [True, True], rewards=[1.0, 1.0])  # the tracker records the group's own outcomes
    assert s.memory.value(p) > v0 + 0.2  # the value now depends on the rewards the replay scores
    buf = ExperienceBuffer(max_age=1)
    buf.add(0, [fresh])
    twin = ExperienceBuffer(max_age=1)
    twin.load_state_dict(json.loads(json.dumps(buf.state_dict())))  # the baseline is checkpointed with the group
    for b in (buf, twin):
        batch = experience_batch(b, s, 1)
        assert batch.groups[0].baseline == v0 and batch.advantages[0].tolist() == pytest.approx([1 - v0, 1 - v0])
    old = ExperienceBuffer(max_age=1)  # a checkpoint without the baseline: the value at replay time
    old.load_state_dict({"steps": [[0, [{**buf.state_dict()["steps"][0][1][0], "baseline": None}]]]})
    assert experience_batch(old, s, 1).groups[0].baseline == s.memory.value(p)


def test_the_config_names_what_samples_mode_needs():
    with pytest.raises(ConfigError, match="replay.mode='samples' needs replay.max_age"):
        ReplayConfig(enabled=True, mode="samples")
    with pytest.raises(ConfigError, match=r"replay.mode='batches' must be one of \['answers', 'samples'\]"):
        ReplayConfig(enabled=True, mode="batches")
    assert isinstance(replay_buffer(ReplayConfig(enabled=True, mode="samples", max_age=1), 0.5), ExperienceBuffer)
    assert isinstance(replay_buffer(ReplayConfig(enabled=True), 0.5), ReplayBuffer)
    assert replay_buffer(ReplayConfig(), 0.5) is None


def test_the_trainer_trains_each_group_twice_off_policy_and_resumes_identically(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer

    def trainer():
        replay = {"enabled": True, "mode": "samples", "max_age": 1}
        spo = {"name": "spo", "n": 2, "select": "none", "batch_normalize": "none"}  # rewards all 0: keep A = -v
        cfg = train_config(model_dir, tmp_path / "run", spo, replay=replay)
        return Trainer(cfg, tensorboard=False)

    tr = trainer()
    m1 = tr.train_step()
    assert m1["experience_groups"] == 0 and m1["samples_trained"] == m1["samples_generated"] == 8
    seen = []
    update = tr.update
    tr.update = lambda rows: (seen.extend(rows), update(rows))[1]
    m2 = tr.train_step()
    replayed = [r for r in seen if r.replayed]
    assert m2["experience_groups"] == 4 and len(replayed) == 8 and m2["samples_generated"] == 8
    assert m2["samples_trained"] == 16 and m2["experience_share"] == pytest.approx(0.5)
    assert all(r.old_logp is not None for r in replayed)  # PPO old policy: the learner's, recomputed
    tr.save()
    m3 = tr.train_step()
    tr.close()
    again = trainer()
    assert again.resume() and again.step == 2
    m3b = again.train_step()
    again.close()
    for key in ("experience_groups", "loss", "grad_norm", "samples_trained", "tokens_trained"):
        assert np.isclose(m3b[key], m3[key], atol=1e-6), key
