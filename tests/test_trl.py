"""The TRL integration: AdaGRPOTrainer against stock GRPOTrainer, each strategy end to end, checkpoints, rewards,
config errors, TRL's hooked signatures, and a two-process `accelerate launch` run (tests/trl_two_process.py)."""

from __future__ import annotations

import inspect
import json
import math
import shutil
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch

trl = pytest.importorskip("trl")
pytest.importorskip("accelerate")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.integrations.trl import HOOKED, AdaGRPOConfig, AdaGRPOTrainer, check_trl  # noqa: E402
from reinforce_ada.integrations.trl_rewards import reward_table  # noqa: E402
from reinforce_ada.sampling.configure import strategy_config  # noqa: E402
from reinforce_ada.sampling.strategies import STRATEGIES, strategy_class  # noqa: E402
from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts  # noqa: E402

pytestmark = pytest.mark.slow  # TRL / Ray start-up: the full suite runs these, the quick loop does not

ROOT = Path(__file__).resolve().parents[1]
COMMON = dict(
    max_completion_length=6,
    use_cpu=True,
    bf16=False,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    gradient_checkpointing=False,
    learning_rate=1e-2,
    seed=0,
)


def make(cls, out, reward=even_length, dataset=None, **kw):
    model, tok = tiny_model_and_tokenizer()
    opts = {**COMMON, "per_device_train_batch_size": 8, "num_generations": 4, **kw}
    config_cls = AdaGRPOConfig if issubclass(cls, AdaGRPOTrainer) else GRPOConfig
    args = config_cls(output_dir=str(out), **opts)
    return cls(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset or tiny_prompts(16), processing_class=tok
    )


class _Recorder:
    """Keeps what `_generate_and_score_completions` hands the loss, per generation batch."""

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.recorded = [*getattr(self, "recorded", []), {k: v for k, v in out.items() if torch.is_tensor(v)}]
        return out


class _RecordStock(_Recorder, GRPOTrainer):
    pass


class _RecordAda(_Recorder, AdaGRPOTrainer):
    pass


def losses(trainer) -> list[float]:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


# -- equivalence ------------------------------------------------------------------------------------------------------
def test_uniform_reproduces_stock_grpo_trainer(tmp_path):
    torch.set_num_threads(1)
    stock = make(_RecordStock, tmp_path / "stock", max_steps=3)
    stock.train()
    ada = make(_RecordAda, tmp_path / "ada", max_steps=3, strategy="uniform")
    ada.train()
    assert len(stock.recorded) == len(ada.recorded) == 3
    for s, a in zip(stock.recorded, ada.recorded, strict=True):
        assert torch.equal(s["completion_ids"], a["completion_ids"])
        assert torch.equal(s["completion_mask"], a["completion_mask"])
        assert torch.equal(s["prompt_ids"], a["prompt_ids"])
        torch.testing.assert_close(a["advantages"], s["advantages"], atol=1e-6, rtol=1e-5)
        assert int(s["num_items_in_batch"]) == int(a["num_items_in_batch"])
        assert "tool_mask" not in a  # nothing padded: TRL's own loss inputs, untouched
    np.testing.assert_allclose(losses(ada), losses(stock), atol=1e-6)
    # on-policy, the dapo loss's value is ~0 whatever the advantages; the gradients and the weights say more
    norms = [[h["grad_norm"] for h in t.state.log_history if "grad_norm" in h] for t in (stock, ada)]
    np.testing.assert_allclose(norms[1], norms[0], rtol=1e-5)
    assert max(norms[0]) > 0.1
    for (name, p), q in zip(stock.model.named_parameters(), ada.model.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-5, msg=name)
    assert ada.ada_history[0]["total"]["samples_generated"] == 8


# -- each strategy, one process ---------------------------------------------------------------------------------------
def test_seq_balanced_end_to_end_with_lora_and_conversational_prompts(tmp_path):
    from datasets import Dataset
    from peft import LoraConfig

    model, tok = tiny_model_and_tokenizer()
    tok.chat_template = "{% for m in messages %}<bos>{{ m['content'] }}{% endfor %}"
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"{i}+{i}="}] for i in range(16)]})
    seen = []

    def reward(completions, **kw):
        seen.extend(completions)
        return [float(len(c[0]["content"]) % 2 == 0) for c in completions]

    args = AdaGRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=8,
        num_generations=4,
        strategy="seq",
        samples_per_round=4,
        max_samples=12,
        **COMMON,
    )
    trainer = AdaGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert isinstance(seen[0], list) and seen[0][0]["role"] == "assistant"
    for h in trainer.ada_history:
        t = h["total"]
        assert t["prompts"] == 2 and t["samples_trained"] == 8  # n = num_generations per prompt
        assert 8 <= t["samples_generated"] <= 24 and 1 <= t["rounds"] <= 3
        assert t["samples_generated"] % 4 == 0  # whole rounds of M = 4
    logged = [h for h in trainer.state.log_history if "ada/samples_generated" in h]
    assert [h["ada/samples_generated"] for h in logged] == [
        h["total"]["samples_generated"] for h in trainer.ada_history
    ]
    for key in (
        "ada/tokens_generated",
        "ada/zero_adv_prompt_share",
        "ada/no_signal_prompt_share",
        "ada/unresolved_prompts",
        "ada/rounds",
        "ada/reward_first_round",
    ):
        assert key in logged[0]
    changed = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert changed and all("lora" in n for n in changed)


def test_seq_advantages_use_the_whole_pool(tmp_path):
    """Round 1 (M = 3): every completion correct; round 2: prompt A gets 0 1 0, prompt B 1 0 1. Both retire (one
    wrong answer each), keep one correct and one wrong, and take the pool's mean as baseline: A 4/6, B 5/6 -- not
    the kept group's 1/2."""
    calls = {"n": 0}

    def reward(completions, **kw):
        calls["n"] += 1
        return [1.0 if calls["n"] == 1 else float(j % 2) for j in range(len(completions))]

    trainer = make(
        _RecordAda,
        tmp_path,
        reward=reward,
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        strategy="seq",
        samples_per_round=3,
        max_samples=9,
    )
    trainer.train()
    adv = trainer.recorded[0]["advantages"].sort().values
    torch.testing.assert_close(adv, torch.tensor([-5 / 6, -4 / 6, 1 / 6, 2 / 6]))
    assert trainer.ada_history[0]["total"]["rounds"] == 2


def test_est_pads_uneven_rows_and_accumulates(tmp_path):
    """4 prompts per process (batch 4 x 2 accumulation steps / 2), a budget of 9 samples: 9 rows are padded to 10, a
    multiple of lcm(num_generations, steps_per_generation) = 2."""
    trainer = make(
        _RecordAda,
        tmp_path,
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        gradient_accumulation_steps=2,
        strategy="est",
        budget=9,
        min_samples=2,
        max_samples=8,
    )
    trainer.train()
    t = trainer.ada_history[0]["total"]
    assert t["prompts"] == 4 and t["samples_generated"] == 9 and t["samples_trained"] == 9
    assert t["padded_rows"] == 1
    out = trainer.recorded[0]
    loss_mask = out["completion_mask"] * out["tool_mask"]  # TRL's own loss mask
    empty = loss_mask.sum(1) == 0
    assert int(empty.sum()) == t["padded_rows"]
    assert torch.all(out["advantages"][empty] == 0)
    assert int(out["num_items_in_batch"]) == int(loss_mask.sum()) == t["tokens_generated"]
    assert all(math.isfinite(x) for x in losses(trainer))


def test_dynamic_refills_from_the_dataset(tmp_path):
    def reward(completions, answer, **kw):  # prompts 0..7 always right: zero variance, dropped and refilled
        return [1.0 if int(a) < 16 else float(len(c) % 2 == 0) for c, a in zip(completions, answer, strict=True)]

    trainer = make(AdaGRPOTrainer, tmp_path, reward=reward, max_steps=2, strategy="dynamic", max_gen_batches=4)
    trainer.train()
    totals = [h["total"] for h in trainer.ada_history]
    assert any(t["dropped_prompts"] > 0 for t in totals)
    assert any(t["prompts"] > 2 for t in totals)  # refills joined the step
    assert all(t["samples_generated"] == 4 * t["prompts"] for t in totals)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_registered_strategy_runs_inside_trl(tmp_path, name):
    """Admission strategies (mopps, greso, pilot_commit's eviction) draw their candidates from the dataset."""
    small = {"max_samples": 8, "samples_per_round": 4, "pilot": 4}  # the sizes the strategy has
    own = strategy_class(name).Options.__dataclass_fields__
    trainer = make(AdaGRPOTrainer, tmp_path, max_steps=2, strategy=name, **{k: v for k, v in small.items() if k in own})
    trainer.train()
    for h in trainer.ada_history:
        t = h["total"]
        assert t["samples_generated"] > 0 and t["prompts"] >= 1 and t["samples_trained"] <= t["samples_generated"]
        if name == "mopps":  # candidates beyond the dataloader's batch came from the dataset
            assert h["local"]["extra"]["offered_prompts"] > t["prompts"]
    assert all(math.isfinite(x) for x in losses(trainer))
    assert trainer.ada_strategy.memory.stats["visits"] == trainer.ada_history[-1]["total"]["prompts"]


# -- checkpoints ------------------------------------------------------------------------------------------------------
def test_strategy_state_is_checkpointed_and_resumed(tmp_path):
    run = dict(max_steps=3, save_strategy="steps", save_steps=1, strategy="est", budget=20)
    full = make(AdaGRPOTrainer, tmp_path / "full", **run)
    full.train()
    state = json.loads((tmp_path / "full/checkpoint-1/reinforce_ada/state_rank0.json").read_text())
    assert state["config"]["name"] == "est" and state["strategy"]["extra"]["tracker"]["counts"]
    shutil.copytree(tmp_path / "full/checkpoint-1", tmp_path / "resumed/checkpoint-1")
    resumed = make(AdaGRPOTrainer, tmp_path / "resumed", **run)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.ada_strategy.tracker.counts == full.ada_strategy.tracker.counts

    def untimed(h):
        return {k: v for k, v in h["total"].items() if k != "time_generate_s"}

    assert [untimed(h) for h in resumed.ada_history] == [untimed(h) for h in full.ada_history[1:]]


# -- rewards ----------------------------------------------------------------------------------------------------------
class _FakeTrainer:
    def __init__(self, funcs, weights):
        self.reward_funcs = funcs
        self.reward_processing_classes = [None] * len(funcs)
        self.reward_func_names = [f.__name__ for f in funcs]
        self.reward_weights = torch.tensor(weights)
        self.state, self.metrics = None, []

    def _log_metric(self, name, value):
        self.metrics.append((name, value))


def test_reward_table_scores_failures_zero_and_counts_them():
    def fragile(completions, **kw):
        if any("x" in c for c in completions):
            raise RuntimeError("cannot parse")
        return [1.0] * len(completions)

    def sometimes_none(completions, answer, log_extra, **kw):
        log_extra("note", [f"n{a}" for a in answer])
        return [None if a == "b" else 0.5 for a in answer]

    trainer = _FakeTrainer([fragile, sometimes_none], [1.0, 2.0])
    examples = [{"prompt": "p", "answer": a} for a in ("a", "b", "a")]
    table, reward, errors, extra = reward_table(trainer, examples, ["p"] * 3, ["ok", "x!", "ok"], [[1], [2], [1]])
    np.testing.assert_array_equal(table[:, 0], [1.0, 0.0, 1.0])  # only the raising row scores 0
    assert np.isnan(table[1, 1]) and table[0, 1] == 0.5
    np.testing.assert_allclose(reward, [2.0, 0.0, 2.0])  # weighted sum, None left out
    assert errors == 1
    assert extra.row(2) == {"note": "na"}


def test_every_reward_none_or_non_finite_scores_zero_and_is_counted():
    def none(completions, **kw):
        return [None, math.inf]

    _, reward, errors, _ = reward_table(
        _FakeTrainer([none], [1.0]), [{"prompt": "p"}] * 2, ["p"] * 2, ["a", "b"], [[1], [2]]
    )
    np.testing.assert_array_equal(reward, [0.0, 0.0])
    assert errors == 2


def test_a_raising_reward_function_is_counted_in_the_ledger(tmp_path):
    def odd_raises(completions, **kw):
        if any(len(c) % 2 for c in completions):
            raise ValueError("odd")
        return [1.0] * len(completions)

    trainer = make(  # about half the rows fail: counted, not stopped (max_verifier_error_share: test_trl_guards.py)
        AdaGRPOTrainer, tmp_path, reward=odd_raises, max_steps=2, strategy="uniform", max_verifier_error_share=1.0
    )
    trainer.train()
    for h in trainer.ada_history:
        t = h["total"]
        odd = t["samples_generated"] - t["reward_trained"] * t["samples_trained"]
        assert t["verifier_errors"] == odd
    assert sum(h["total"]["verifier_errors"] for h in trainer.ada_history) > 0
    logged = [h["ada/verifier_errors"] for h in trainer.state.log_history if "ada/verifier_errors" in h]
    assert logged == [h["total"]["verifier_errors"] for h in trainer.ada_history]


# -- configuration ----------------------------------------------------------------------------------------------------
def test_config_has_every_strategy_option_with_its_help(tmp_path):
    ours = {f.name: f for f in fields(AdaGRPOConfig)}
    for cls in STRATEGIES.values():  # every registered strategy's options, n aside (TRL's num_generations)
        for f in fields(cls.Options):
            if f.name == "n":
                continue
            mine = [o.Options.__dataclass_fields__.get(f.name) for o in STRATEGIES.values()]
            agreed = len({repr(g.default) for g in mine if g is not None}) == 1
            assert ours[f.name].default == (f.default if agreed else None)  # None: the strategy's own
            assert f.metadata["help"] in ours[f.name].metadata["help"]
    cfg = AdaGRPOConfig(
        output_dir=str(tmp_path),
        strategy="est",
        budget=12,
        num_generations=4,
        use_cpu=True,
        per_device_train_batch_size=8,
    )
    assert cfg.strategy_config(seed=3) == strategy_config(name="est", n=4, budget=12, seed=3)


def test_config_parses_from_the_command_line(tmp_path):
    from transformers import HfArgumentParser

    (cfg,) = HfArgumentParser(AdaGRPOConfig).parse_args_into_dataclasses(
        [
            "--output_dir",
            str(tmp_path),
            "--strategy",
            "seq",
            "--exit",
            "positive",
            "--k_pos",
            "2",
            "--use_cpu",
            "true",
            "--per_device_train_batch_size",
            "8",
        ]
    )
    assert (cfg.strategy, cfg.exit, cfg.k_pos) == ("seq", "positive", 2)


@pytest.mark.parametrize(
    "opts, named",
    [
        ({"strategy": "greedy"}, "strategy='greedy'"),
        ({"exit": "sometimes"}, "exit='sometimes'"),
        ({"max_samples": 2}, "num_generations=4 must be <= max_samples=2"),
        ({"samples_per_round": 0}, "samples_per_round=0"),
        ({"decay": 1.5}, "decay=1.5"),
        ({"scale_rewards": "batch"}, "scale_rewards='batch'"),
    ],
)
def test_bad_option_fails_at_config_time_naming_the_field(tmp_path, opts, named):
    base = {"output_dir": str(tmp_path), "use_cpu": True, "num_generations": 4, "per_device_train_batch_size": 8}
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace("*", r"\*")):
        AdaGRPOConfig(**{**base, **opts})


def test_each_process_must_hold_whole_prompt_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(AdaGRPOConfig, "world_size", property(lambda self: 2))  # as under accelerate launch
    with pytest.raises(ConfigError, match="per_device_train_batch_size.*num_generations=4"):
        AdaGRPOConfig(output_dir=str(tmp_path), use_cpu=True, num_generations=4, per_device_train_batch_size=2)


def test_trainer_refuses_a_plain_grpo_config_and_rollout_func(tmp_path, monkeypatch):
    model, tok = tiny_model_and_tokenizer()
    plain = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=8, num_generations=4)
    with pytest.raises(ConfigError, match="AdaGRPOConfig"):
        AdaGRPOTrainer(
            model=model, reward_funcs=even_length, args=plain, train_dataset=tiny_prompts(8), processing_class=tok
        )
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    args = AdaGRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=8, num_generations=4)
    with pytest.raises(ConfigError, match="rollout_func"):
        AdaGRPOTrainer(
            model=model,
            reward_funcs=even_length,
            args=args,
            train_dataset=tiny_prompts(8),
            processing_class=tok,
            rollout_func=lambda prompts, trainer: {},
        )


# -- TRL's private methods --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(HOOKED))
def test_hooked_trl_method_signature_is_the_tested_one(name):
    actual = str(inspect.signature(getattr(GRPOTrainer, name)))
    assert actual == HOOKED[name], (
        f"TRL {trl.__version__} changed GRPOTrainer.{name}: now {name}{actual}, AdaGRPOTrainer was written against "
        f"{name}{HOOKED[name]}; update reinforce_ada/integrations/trl*.py and HOOKED"
    )


def test_check_trl_names_a_changed_method():
    class Changed(GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images, x):
            pass

    check_trl()
    with pytest.raises(RuntimeError, match="_generate_single_turn"):
        check_trl(Changed)


# -- two processes ----------------------------------------------------------------------------------------------------
def test_two_processes_agree_on_rounds_and_sum_their_ledgers(tmp_path):
    """`accelerate launch` with two CPU processes (gloo): est with even-length rewards, then seq where rank 0's
    prompts all retire in round 1 and rank 1's never resolve (it must not hang)."""
    from tests.trl_two_process import launch

    runs = launch(tmp_path, ["est", "seq-asymmetric"])
    for name, (r0, r1) in runs.items():
        assert r0["world"] == r1["world"] == 2 and r0["backend"] == "gloo"
        assert r0["memory"] == r1["memory"]  # every process's visits were shared
        assert r0["memory"]["stats"]["visits"] == r0["history"][-1]["total"]["prompts"]
        for h0, h1 in zip(r0["history"], r1["history"], strict=True):
            assert h0["total"] == h1["total"]
            for key in (
                "prompts",
                "samples_generated",
                "tokens_generated",
                "samples_trained",
                "unresolved_prompts",
                "verifier_errors",
                "zero_adv_prompts",
            ):
                assert h0["total"][key] == h0["local"][key] + h1["local"][key], (name, key)
            assert h0["total"]["rounds"] == max(h0["local"]["rounds"], h1["local"]["rounds"])
        logged = [h["ada/samples_generated"] for h in r0["log_history"] if "ada/samples_generated" in h]
        assert logged == [h["total"]["samples_generated"] for h in r0["history"]]
    assert all(h["total"]["padded_rows"] == 2 for h in runs["est"][0]["history"])  # 9 rows -> 10 on each process
    r0, r1 = runs["seq-asymmetric"]
    for h0, h1 in zip(r0["history"], r1["history"], strict=True):
        assert h0["local"]["rounds"] == 1 and h1["local"]["rounds"] == 4  # retired at once vs cap 8 / M 2
        assert h0["local"]["ticks"] == h1["local"]["ticks"] == 4  # rank 0 took part in every round
        assert h0["local"]["dummy_rows"] == 3 and h1["local"]["dummy_rows"] == 0
        assert h1["local"]["unresolved_prompts"] == 2


def test_spo_runs_inside_trl_with_two_samples_and_one_is_refused_naming_why(tmp_path):
    trainer = make(AdaGRPOTrainer, tmp_path, max_steps=2, strategy="spo", candidates=2, num_generations=2)
    trainer.train()
    h = trainer.ada_history[-1]["total"]
    assert h["samples_generated"] == h["samples_trained"] > 0 and all(math.isfinite(x) for x in losses(trainer))
    assert trainer.ada_strategy.memory.tracker.counts  # the tracker learned from the visits
    with pytest.raises(ConfigError, match="num_generations=1: TRL's GRPOTrainer trains groups of >= 2"):
        AdaGRPOConfig(output_dir=str(tmp_path), use_cpu=True, num_generations=1, per_device_train_batch_size=4)
