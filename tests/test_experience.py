"""Experience replay with a staleness cap (`[replay] mode = "samples"`, `training.experience`): each step's trained
groups are trained again in the next `max_age` steps, off-policy corrected, their tracker advantages recomputed with
the prompt's value at replay time; counted as trained, not generated; resumed identically."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.configure import strategy_config
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.training.experience import ExperienceBuffer, experience_batch, replay_buffer
from reinforce_ada.training.replay import ReplayBuffer
from reinforce_ada.training.replay_config import ReplayConfig
from reinforce_ada.types import Group, Prompt, Sample
from tests.helpers import train_config


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


def test_a_replayed_group_takes_the_tracker_baseline_of_replay_time():
    s = build_strategy(strategy_config("spo", n=2, select="none", batch_normalize="none"))
    p = Prompt("a", "a")
    s.memory.record(p, [True, True, True, True], rewards=[1.0] * 4)  # the value has moved up since the group
    buf = ExperienceBuffer(max_age=1)
    buf.add(0, [group("a", [1.0, 0.0])])
    batch = experience_batch(buf, s, 1)
    v = s.memory.value(p)
    assert v > 0.6 and batch.groups[0].baseline == v
    assert batch.advantages[0].tolist() == pytest.approx([1.0 - v, -v])


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
