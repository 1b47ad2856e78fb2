"""Replay of earlier correct answers (training.replay): the buffer rule, the truncated importance weight, the ledger,
checkpoints, config errors, the integrations' refusals and a tiny trainer run with replay on."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from reinforce_ada.bench.arms import ARMS
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm, strategy_config
from reinforce_ada.sampling.ledger import Ledger, StepBatch
from reinforce_ada.sampling.strategies import strategy_class
from reinforce_ada.training import checkpoint
from reinforce_ada.training.config import ReplayConfig
from reinforce_ada.training.losses import policy_loss
from reinforce_ada.training.replay import ReplayBuffer, fresh_mask, replay_step, replay_weights
from reinforce_ada.training.rows import Row
from reinforce_ada.types import Group, Prompt, Sample
from tests.helpers import train_config


class FakeStrategy:
    """What `replay_step` reads of a strategy: its config and the step's pools."""

    def __init__(self, cfg: StrategyConfig, groups: list[Group]):
        self.cfg, self.opts = cfg, cfg.options
        self.pools = {g.prompt.id: list(g.samples) for g in groups}


def S(pid: str, reward: float, n_tok: int = 3, index: int = 0, lp: float = -1.0) -> Sample:
    return Sample(pid, "x" * n_tok, list(range(5, 5 + n_tok)), [lp] * n_tok, n_tok, "eos", reward, 0, index)


def G(pid: str, rewards: list[float], n_tok: int = 3) -> Group:
    samples = [S(pid, r, n_tok, index=i) for i, r in enumerate(rewards)]
    return Group(Prompt(pid, "q " + pid, "1"), samples, [float(r) for r in rewards])


def batch_of(groups: list[Group], cfg: StrategyConfig) -> tuple[StepBatch, FakeStrategy]:
    from reinforce_ada.sampling.advantages import compute_advantages

    advs, w = compute_advantages(groups, estimator=cfg.options.advantage, std=cfg.options.scale_std)
    n = sum(len(g.samples) for g in groups)
    tokens = sum(len(s.token_ids) for g in groups for s in g.samples)
    led = Ledger(
        prompts=len(groups), samples_generated=n, tokens_generated=tokens, samples_trained=n, tokens_trained=tokens
    )
    led.prompts_trained = len(groups)
    return StepBatch(groups, advs, w, led), FakeStrategy(cfg, groups)


GRPO = strategy_config(name="uniform", n=4)
ON = ReplayConfig(enabled=True)


def _seed_buffer(buf: ReplayBuffer, step: int = 0) -> None:
    """Step `step`: prompt a has one correct answer of 7 tokens with log-probs -0.5, b has none."""
    a = G("a", [0, 0, 0, 0])
    a.samples[1] = S("a", 1.0, n_tok=7, index=1, lp=-0.5)
    batch, strat = batch_of([a, G("b", [0, 0, 0, 0])], GRPO)
    assert replay_step(buf, batch, strat, step) == []  # nothing stored yet: nothing replayed
    assert set(buf.entries) == {"a"} and buf.entries["a"].step == step and buf.entries["a"].logprobs == [-0.5] * 7


def test_all_wrong_group_with_a_stored_answer_gets_exactly_one_correct_and_signal():
    buf = ReplayBuffer.for_config(ON, GRPO.options.threshold)
    _seed_buffer(buf)
    batch, strat = batch_of([G("a", [0, 0, 0, 0]), G("b", [0, 0, 0, 0])], GRPO)
    flat = replay_step(buf, batch, strat, step=1)
    a, b = batch.groups
    assert len(a.samples) == 4 and [s.reward for s in a.samples] == [0, 0, 0, 1.0]  # the last wrong one replaced
    assert a.samples[3].token_ids == list(range(5, 12)) and a.samples[3].logprobs == [-0.5] * 7
    assert sorted(a.pool_rewards) == [0, 0, 0, 1.0]
    assert np.any(np.abs(batch.advantages[0]) > 0) and batch.advantages[0][3] > 0  # the group now has signal
    assert np.all(batch.advantages[1] == 0)  # b had nothing stored
    assert flat == [3]  # row index of the replayed sample in batch_rows order
    led = batch.ledger
    # accounting: generation untouched, the replay is trained
    assert (led.samples_generated, led.tokens_generated) == (8, 24)
    assert (led.samples_trained, led.tokens_trained) == (8, 24 - 3 + 7)
    assert led.zero_adv_prompts == 1 and led.reward_trained == pytest.approx(1 / 8)
    assert led.extra["replay_prompts"] == 1 and led.extra["replay_share"] == pytest.approx(1 / 8)
    assert led.extra["replay_age_mean"] == 1.0 and led.extra["replay_buffer_size"] == 1


def test_global_baseline_sees_the_replay_as_one_of_the_pools_draws():
    cfg = strategy_config(name="seq")  # global baseline, no std
    buf = ReplayBuffer.for_config(ON, cfg.options.threshold)
    _seed_buffer(buf)
    g = G("a", [0, 0, 0, 0])
    g.pool_rewards = [0.0] * 8  # 8 drawn, 4 kept
    batch, strat = batch_of([g], cfg)
    replay_step(buf, batch, strat, step=1)
    assert batch.advantages[0].tolist() == pytest.approx([-1 / 8] * 3 + [7 / 8])


def test_no_replay_when_the_group_has_a_correct_sample_or_the_entry_is_too_old():
    buf = ReplayBuffer.for_config(ON, GRPO.options.threshold)
    _seed_buffer(buf)
    batch, strat = batch_of([G("a", [0, 1, 0, 0])], GRPO)
    assert replay_step(buf, batch, strat, step=1) == [] and batch.ledger.extra["replay_prompts"] == 0
    assert buf.entries["a"].step == 1  # this step's correct answer replaced the stored one

    old = ReplayBuffer.for_config(ReplayConfig(enabled=True, max_age=2), GRPO.options.threshold)
    _seed_buffer(old, step=0)
    batch, strat = batch_of([G("a", [0, 0, 0, 0])], GRPO)
    assert replay_step(old, batch, strat, step=3) == []  # 3 steps old > max_age 2
    assert [s.reward for s in batch.groups[0].samples] == [0, 0, 0, 0]
    batch, strat = batch_of([G("a", [0, 0, 0, 0])], GRPO)
    assert replay_step(old, batch, strat, step=2) == [3]  # 2 steps old: still usable
    assert old.usable("a", 0) is None  # an answer is never replayed at the step it was generated


def test_a_replayed_answer_keeps_its_age_even_when_the_strategy_shares_its_lists():
    buf = ReplayBuffer.for_config(ReplayConfig(enabled=True, max_age=2), GRPO.options.threshold)
    _seed_buffer(buf, step=0)
    g = G("a", [0, 0, 0, 0])
    batch, strat = batch_of([g], GRPO)
    strat.pools = {"a": g.samples}  # a strategy whose pool is the group's own list
    assert replay_step(buf, batch, strat, step=1) == [3]
    assert [s.reward for s in strat.pools["a"]] == [0, 0, 0, 0]  # the strategy's pool is not edited
    assert buf.entries["a"].step == 0  # the replayed answer was not stored again as fresh
    batch, strat = batch_of([G("a", [0, 0, 0, 0])], GRPO)
    assert replay_step(buf, batch, strat, step=3) == []  # so it ages out


def test_replay_weight_is_the_ratio_to_the_stored_behaviour_log_probs_truncated_at_clip():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0]])
    behaviour = torch.tensor([[-1.5, -1.0, -3.0], [-2.0, -1.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    rows = [Row([1], [1, 2, 3], [], 1.0, 1.0, replayed=True), Row([1], [1, 2], [], 1.0, 1.0)]
    w = replay_weights(rows, old, behaviour, mask, 2.0, None, "token")
    expected = [min(math.exp(0.5), 2.0), math.exp(-1.0), 2.0]  # exp(2.5) = 12.2 truncated at 2
    seq = replay_weights(rows, old, behaviour, mask, 10.0, None)  # the default: the whole answer's ratio
    assert seq[0].tolist() == pytest.approx([math.exp(0.5 - 1.0 + 2.5)] * 3)
    assert replay_weights(rows, old, behaviour, mask, 2.0, None)[0].tolist() == [2.0] * 3  # truncated at clip
    assert w[0].tolist() == pytest.approx(expected)
    assert w[1, :2].tolist() == [1.0, 1.0]  # the on-policy row is unchanged
    base = torch.full((2, 3), 0.5)
    assert replay_weights(rows, old, behaviour, mask, 2.0, base, "token")[1, :2].tolist() == [0.5, 0.5]
    on_policy = base[1:]
    assert replay_weights(rows[1:], old[1:], behaviour[1:], mask[1:], 2.0, on_policy) is on_policy  # no replay: as is
    assert fresh_mask(rows, mask).tolist() == [[False] * 3, [True, True, False]]
    # in the loss, at pi_theta = pi_old the gradient of each token is -A * min(pi_theta / pi_behaviour, clip) / tokens
    logp = old.clone().requires_grad_(True)
    res = policy_loss(logp, old, torch.tensor([1.0, 1.0]), mask, is_weight_BT=w, dual_clip=None)
    res.loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-x / 5 for x in expected])


def _toy_cosines(clip: float = 1e9) -> dict[str, float]:
    """Two-token answers over {0, 1}: pi_theta's first token has logits (1, 0), the behaviour's (0, 0); both pick the
    second token with logits (1, -1) after a 0 and (-1, 1) after a 1; A = +1 when the tokens match, else -1. Every
    answer is enumerated, so each estimator's expected gradient is exact: E_behaviour[A * sum_t w_t grad log
    pi_theta(y_t | y_<t)], with w from `replay_weights` (the trainer's code), against the current policy's
    E_theta[A grad log pi_theta(y)]. Returns the cosine of each correction's expected gradient with the true one."""
    theta = torch.tensor([1.0, 0.0, 1.0, -1.0, -1.0, 1.0], dtype=torch.float64, requires_grad=True)
    behaviour = torch.tensor([0.0, 0.0, 1.0, -1.0, -1.0, 1.0], dtype=torch.float64)

    def logp(params: torch.Tensor, y: tuple[int, int]) -> torch.Tensor:  # (2,): log-prob of each token
        first, second = params[:2], params[2:].view(2, 2)
        return torch.stack([torch.log_softmax(first, -1)[y[0]], torch.log_softmax(second[y[0]], -1)[y[1]]])

    true = torch.zeros(6, dtype=torch.float64)
    est = {c: torch.zeros(6, dtype=torch.float64) for c in ("sequence", "token")}
    for y in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        adv = 1.0 if y[0] == y[1] else -1.0
        lp, lb = logp(theta, y), logp(behaviour, y)
        true += lp.sum().exp().detach() * adv * torch.autograd.grad(lp.sum(), theta, retain_graph=True)[0]
        row = Row([0], list(y), lb.tolist(), adv, 1.0, replayed=True)
        for c in est:
            w = replay_weights([row], lp.detach()[None], lb[None], torch.ones(1, 2, dtype=torch.bool), clip, None, c)
            grad = torch.autograd.grad((w[0] * lp).sum(), theta, retain_graph=True)[0]
            est[c] += lb.sum().exp() * adv * grad
    return {c: float(torch.nn.functional.cosine_similarity(true, g, dim=0)) for c, g in est.items()}


def test_the_sequence_ratio_follows_the_current_policys_gradient_and_the_token_ratio_does_not():
    """Issue 40 item 3: replay used to weight each token by its own ratio; the prefix each token is conditioned on
    stays the behaviour's, so the expected gradient points elsewhere (cosine 0.91 in this toy). The whole answer's
    ratio, now `replay.correction = "sequence"` (the default), is exact before truncation (cosine 1.00)."""
    cos = _toy_cosines()
    assert cos["sequence"] == pytest.approx(1.0, abs=1e-12)
    assert cos["token"] == pytest.approx(0.908, abs=1e-3)
    assert ReplayConfig().correction == "sequence"
    with pytest.raises(ConfigError, match=r"replay.correction='tokens' must be one of \['sequence', 'token'\]"):
        ReplayConfig(enabled=True, correction="tokens")


def test_buffer_round_trips_through_a_checkpoint_state():
    buf = ReplayBuffer.for_config(ON, GRPO.options.threshold)
    _seed_buffer(buf, step=4)
    tensors: dict = {}
    state = checkpoint.unpack(json.loads(json.dumps(checkpoint.pack({"replay": buf.state_dict()}, tensors))), tensors)
    again = ReplayBuffer.for_config(ON, GRPO.options.threshold)
    again.load_state_dict(state["replay"])
    assert again.entries == buf.entries


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"clip": 0.5}, "replay.clip=0.5 must be a finite number >= 1"),
        ({"max_age": 0}, "replay.max_age=0 must be a whole number of steps >= 1"),
        ({"enabled": "yes"}, "replay.enabled='yes' must be true or false"),
    ],
)
def test_bad_replay_values_fail_naming_the_key_and_what_is_valid(model_dir, tmp_path, changes, match):
    from reinforce_ada.training.config import TrainConfig

    with pytest.raises(ConfigError, match=match):
        TrainConfig(replay=ReplayConfig(**changes))


def test_bad_replay_values_from_toml_or_arm_specs(tmp_path):
    from reinforce_ada.bench.arms import resolve_arms
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    with pytest.raises(ConfigError, match="replay.max_age"):  # 0.3's [strategy] key, read as [replay]'s
        apply_overrides(TrainConfig(), {"strategy": {"replay_max_age": "soon"}}, "test")
    with pytest.raises(ConfigError, match="replay.clip=inf"):
        resolve_arms(["r=uniform:n=4 | replay.enabled=true,replay.clip=inf"])
    with pytest.raises(ConfigError, match="replay: not an option of strategy 'uniform'"):  # a training setting now
        parse_arm("uniform:replay=true")
    cfg = apply_overrides(TrainConfig(), {"strategy": {"replay": "true", "replay_max_age": "none"}}, "test")
    assert cfg.replay.enabled and cfg.replay.max_age is None
    from reinforce_ada.training.config import load_toml, to_toml

    for age in (None, 7):  # a run's config.toml (what --resume reads) keeps the replay fields
        cfg = apply_overrides(cfg, {"replay": {"max_age": age, "clip": 3.5}}, "test")
        (tmp_path / "c.toml").write_text(to_toml(cfg))
        assert load_toml(tmp_path / "c.toml") == cfg


def test_the_replay_arm_is_grpo_n4_with_replay_and_in_no_registered_list():
    from reinforce_ada.bench import arms

    (_, arm), _ = arms.resolve_arms(["grpo-n4", "replay"])
    assert (arm.cfg.name, arm.cfg.options.n, arm.train) == ("uniform", 4, (("replay.enabled", True),))
    assert arm.cfg == parse_arm(ARMS["grpo-n4"])
    assert all("replay" not in getattr(arms, x) for x in ("UNIFORM", "ORACLES", "HEADLINE"))


def test_the_replay_refusal_names_the_integrations_option():
    from reinforce_ada.training.replay import refuse

    refuse(False, "the verl plugin", option="ada.replay")  # off: nothing to refuse
    with pytest.raises(ConfigError, match="ada.replay=true is not supported by the verl plugin"):
        refuse(True, "the verl plugin", option="ada.replay")  # the plugin's own wiring: tests/test_verl.py


@pytest.mark.slow
def test_trl_refuses_replay(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    args = AdaGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, num_generations=4, per_device_train_batch_size=8, replay=True
    )
    with pytest.raises(ConfigError, match="replay=true is not supported by AdaGRPOTrainer"):
        AdaGRPOTrainer(model="unused", reward_funcs=[], args=args)


# -- the trainer -----------------------------------------------------------------------------------------------------
class Switch:
    """A verifier that pays for even-length completions until switched off, then nothing (every group all wrong)."""

    def __init__(self) -> None:
        self.on = True

    def __call__(self, completion: str, answer: str) -> float:
        return float(self.on and len(completion) % 2 == 0)


def _trainer(model_dir, run_dir, **strategy):
    from reinforce_ada.training.trainer import Trainer

    cfg = train_config(
        model_dir,
        run_dir,
        {"name": "uniform", "n": 4, **strategy},
        replay={"enabled": True},
        task={"train_size": 4},  # one batch = the whole pool: every prompt is revisited every step
        run={"steps": 3, "save_every": 1},
    )
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = Switch()
    return tr


def test_tiny_trainer_replays_stored_answers_off_policy_and_resumes_identically(model_dir, tmp_path):
    tr = _trainer(model_dir, tmp_path / "run")
    m1 = tr.train_step()
    assert m1["replay_prompts"] == 0 and tr.replay.entries  # step 0: correct answers stored, none replayed
    stored = {pid: e.step for pid, e in tr.replay.entries.items()}
    assert set(stored.values()) == {0}
    tr.verifier.on = False
    seen = []
    update = tr.update
    tr.update = lambda rows: (seen.extend(rows), update(rows))[1]
    m2 = tr.train_step()
    replayed = [r for r in seen if r.replayed]
    assert m2["replay_prompts"] == len(stored) == len(replayed) > 0
    assert m2["samples_generated"] == 16 and m2["samples_trained"] == 16
    assert m2["replay_share"] == pytest.approx(len(replayed) / 16)
    assert m2["zero_adv_prompt_share"] == pytest.approx(1 - len(stored) / 4) and m2["grad_norm"] > 0
    for r in replayed:  # behaviour log-probs kept; the PPO old policy is the learner's (recomputed, no grad)
        entry = next(e for e in tr.replay.entries.values() if e.token_ids == r.completion_ids)
        assert r.sampler_logp == entry.logprobs and r.old_logp is not None and r.adv > 0
    assert all(r.old_logp is None for r in seen if not r.replayed)  # on-policy rows: sampler mode, untouched
    tr.save()
    m3 = tr.train_step()
    tr.close()
    assert m3["replay_prompts"] > 0 and m3["replay_age_mean"] == 2.0  # the resumed step below replays too

    again = _trainer(model_dir, tmp_path / "run")
    again.verifier.on = False
    assert again.resume() and again.step == 2
    assert {p: (e.step, e.token_ids) for p, e in again.replay.entries.items()} == {
        p: (e.step, e.token_ids) for p, e in tr.replay.entries.items()
    }
    m3b = again.train_step()
    again.close()
    for key in ("replay_prompts", "replay_share", "loss", "grad_norm", "samples_generated", "tokens_trained"):
        assert m3b[key] == pytest.approx(m3[key], abs=1e-6), key


def test_replay_off_leaves_the_state_and_metrics_as_before(model_dir, tmp_path):
    from reinforce_ada.training.trainer import Trainer

    tr = Trainer(train_config(model_dir, tmp_path / "run", {"name": "uniform", "n": 4}), tensorboard=False)
    assert tr.replay is None and "replay" not in tr.state_dict()
    m = tr.train_step()
    tr.close()
    assert not any(k.startswith("replay") for k in m)


def test_replay_with_recomputed_old_log_probs(model_dir, tmp_path):
    tr = _trainer(model_dir, tmp_path / "run")
    tr.cfg = dataclasses.replace(tr.cfg, optim=dataclasses.replace(tr.cfg.optim, old_logprobs="recompute"))
    tr.train_step()
    tr.verifier.on = False
    m = tr.train_step()
    tr.close()
    assert m["replay_prompts"] > 0 and math.isfinite(m["loss"])
    assert m["mismatch_logp_abs_max"] < 1e-4  # replayed rows are kept out of the sampler/learner mismatch


@pytest.mark.parametrize("name", ["seq", "est", "dynamic", "knapsack", "pilot_commit", "mopps", "greso"])
def test_replay_composes_with_every_strategy(model_dir, tmp_path, name):
    small = {"max_samples": 8, "samples_per_round": 4, "pilot": 4, "candidates": 2}
    own = strategy_class(name).Options.__dataclass_fields__
    tr = _trainer(model_dir, tmp_path / "run", name=name, **{k: v for k, v in small.items() if k in own})
    tr.train_step()
    tr.verifier.on = False
    m = tr.train_step()
    tr.close()
    assert 0 <= m["replay_share"] <= 1 and m["replay_prompts"] <= len(tr.replay.entries)
    assert math.isfinite(m["loss"])
    if name in ("seq", "est", "knapsack", "mopps"):  # all-wrong groups are trained (kept, or unresolved=keep)
        assert m["replay_prompts"] > 0
    else:  # DAPO and GRESO drop zero-variance groups, Pilot-Commit never commits a 0-of-pilot prompt: none to fill
        assert m["replay_prompts"] == 0


def test_a_replayed_answer_is_flagged_in_samples_log_and_left_out_of_the_clipped_share():
    """samples.jsonl says which answer was replayed (and from which step); the step's clipped share counts only what
    this step generated."""
    from types import SimpleNamespace

    from reinforce_ada.training.samples_log import clipped_share, sample_rows
    from reinforce_ada.types import Group, Prompt, Sample

    p = Prompt(id="q", text="1+1=", answer="2")
    replayed = Sample("q", text="2", token_ids=[1], num_tokens=1, finish_reason="length", reward=1.0, replayed_from=3)
    fresh = Sample("q", text="3", token_ids=[1], num_tokens=1, finish_reason="eos", reward=0.0, index=1)
    groups = [Group(prompt=p, samples=[replayed, fresh], pool_rewards=[1.0, 0.0]), Group(p, [fresh], [0.0])]
    batch = SimpleNamespace(groups=groups)
    rows = sample_rows(7, batch, 2)
    assert rows[0]["replayed_from"] == 3 and "replayed_from" not in rows[1]
    assert clipped_share(batch) == 0.0  # the replayed answer's `length` is not this step's


def test_the_03_replay_flags_are_refused_naming_the_new_ones(capsys):
    from reinforce_ada.cli import main

    for old, new in (("--replay", "--replay.enabled"), ("--replay-clip", "--replay.clip")):
        with pytest.raises(SystemExit) as e:
            main(["train", old, "true" if old == "--replay" else "3"])
        assert e.value.code == 2 and f"{old} is now {new}" in capsys.readouterr().err
