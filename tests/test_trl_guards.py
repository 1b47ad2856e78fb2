"""The TRL integration refuses what it cannot train on, with messages naming the value: option types and reward
weights at config time, rewards that are not finite real numbers, a step where most rewards failed
(`max_verifier_error_share`), and checkpoint state that is damaged or another strategy's."""

from __future__ import annotations

import json
import math
import re
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("accelerate")

from datasets import Dataset  # noqa: E402

from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer  # noqa: E402
from reinforce_ada.integrations.trl_ledger import RewardsFailedError, check_verifier_errors  # noqa: E402
from reinforce_ada.integrations.trl_rewards import reward_table  # noqa: E402
from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts  # noqa: E402

pytestmark = pytest.mark.slow  # TRL / Ray start-up: the full suite runs these, the quick loop does not

BASE = {"use_cpu": True, "bf16": False, "report_to": "none", "num_generations": 4, "per_device_train_batch_size": 8}


def config(tmp_path, **kw) -> AdaGRPOConfig:
    return AdaGRPOConfig(output_dir=str(tmp_path), **{**BASE, **kw})


# -- config time ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "opts, named",
    [
        ({"k_pos": "2"}, "k_pos='2' (str) is not valid: k_pos must be an integer or None"),
        ({"max_samples": 2.5}, "max_samples=2.5 (float) is not valid: max_samples must be an integer"),
        ({"budget": True}, "budget=True (bool) is not valid: budget must be an integer or None"),
        ({"threshold": "0.5"}, "threshold='0.5' (str) is not valid: threshold must be a real number"),
        ({"strategy": 3}, "strategy=3 (int) is not valid: strategy must be a string"),
        ({"scale_std": 1}, "scale_std=1 (int) is not valid: scale_std must be True or False or None"),
        ({"reward_weights": [math.nan, 1.0]}, "reward_weights[0]=nan is not valid"),
        ({"reward_weights": [1.0, math.inf]}, "reward_weights[1]=inf is not valid"),
        ({"max_verifier_error_share": 1.5}, "max_verifier_error_share=1.5 is not valid"),
        ({"max_verifier_error_share": math.nan}, "max_verifier_error_share=nan is not valid"),
    ],
)
def test_a_wrong_type_or_non_finite_option_fails_at_config_time(tmp_path, opts, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        config(tmp_path, **opts)


def test_well_typed_options_still_pass(tmp_path):
    cfg = config(tmp_path, k_pos=2, threshold=0, max_samples=np.int64(16), reward_weights=[1, 0.5])
    assert cfg.strategy_config().options.k_pos == 2 and cfg.max_verifier_error_share == 0.5


# -- rewards ----------------------------------------------------------------------------------------------------------
class _FakeTrainer:
    def __init__(self, funcs, weights):
        self.reward_funcs = funcs
        self.reward_processing_classes = [None] * len(funcs)
        self.reward_func_names = [f.__name__ for f in funcs]
        self.reward_weights = torch.tensor(weights, dtype=torch.float64)
        self.state = None

    def _log_metric(self, name, value):
        pass


def score(funcs, weights, rows=2):
    return reward_table(
        _FakeTrainer(funcs, weights), [{"prompt": "p"}] * rows, ["p"] * rows, ["a"] * rows, [[1]] * rows
    )


def returning(*values):
    def bad_reward(completions, **kw):
        return list(values)

    return bad_reward


@pytest.mark.parametrize(
    "value, shown",
    [("1.0", "'1.0' (str)"), ({"score": 1}, "{'score': 1} (dict)"), (1j, "1j (complex)"), (1e308, "1e+308")],
)
def test_a_reward_that_is_not_a_real_number_trl_can_hold_names_the_function_row_and_value(value, shown):
    with pytest.raises(ConfigError, match=re.escape(f"'bad_reward' returned {shown} for row 1: a reward must be")):
        score([returning(0.5, value)], [1.0])


def test_a_weighted_sum_that_overflows_names_the_row_and_weights():
    with pytest.raises(ConfigError, match=r"row 0: the weighted reward .* overflows .*reward_weights \[2\.0\]"):
        score([returning(3e38, 1.0)], [2.0])


def test_numpy_torch_and_bool_rewards_are_numbers():
    _, reward, errors, _ = score([returning(np.float32(0.5), torch.tensor(0.25)), returning(True, np.int64(2))], [1, 1])
    np.testing.assert_allclose(reward, [1.5, 2.25])
    assert errors == 0


def test_a_row_is_counted_once_however_many_functions_fail_on_it():
    def raises(completions, **kw):
        raise RuntimeError("reward service down")

    _, reward, errors, _ = score([raises, returning(math.nan, 1.0)], [1.0, 1.0])
    np.testing.assert_array_equal(reward, [0.0, 1.0])
    assert errors == 2  # row 0: both functions failed; row 1: the first did


def test_a_reward_too_large_for_a_float_names_the_function_and_row():
    """Issue 40: 10**400 (an int) was an OverflowError traceback from float()."""
    with pytest.raises(ConfigError, match=r"'bad_reward' returned an integer of 401 digits for row 1: a reward must"):
        score([returning(1, 10**400)], [1.0])


def test_a_reward_function_raising_keyboardinterrupt_scores_0_but_a_real_ctrl_c_stops():
    """Issue 40: a reward function raising KeyboardInterrupt stopped the run as if Ctrl-C; it now scores 0 and is
    counted (as our verifiers' contract), while a SIGINT arriving during the call still stops the run."""
    import os
    import signal
    import time

    def interrupts(completions, **kw):
        raise KeyboardInterrupt

    def exits(completions, **kw):
        raise SystemExit(3)

    _, reward, errors, _ = score([interrupts, exits, returning(1.0, 1.0)], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(reward, [1.0, 1.0])
    assert errors == 2

    def user_presses_ctrl_c(completions, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
        return [1.0] * len(completions)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
    try:
        with pytest.raises(KeyboardInterrupt):
            score([user_presses_ctrl_c], [1.0])
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler before is back
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a process that ignores SIGINT goes on ignoring it
        _, reward, errors, _ = score([user_presses_ctrl_c], [1.0])
        np.testing.assert_array_equal(reward, [1.0, 1.0])
        assert errors == 0 and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"question": ["a", "b"]}, r"train_dataset has no 'prompt' column; its columns are \['question'\]"),
        ({"prompt": ["a", None]}, r"train_dataset row 1: the prompt is NoneType None"),
        ({"prompt": ["a", "  "]}, r"train_dataset row 1: the prompt is empty"),
        ({"prompt": [[{"role": "user", "content": "hi"}], []]}, r"row 1: the prompt is list \[\]"),
    ],
)
def test_a_dataset_without_usable_prompts_is_refused_naming_the_row(tmp_path, rows, match):
    from datasets import Dataset

    model, tok = tiny_model_and_tokenizer()
    with pytest.raises(ConfigError, match=match):
        AdaGRPOTrainer(
            model=model, reward_funcs=even_length, args=config(tmp_path), train_dataset=Dataset.from_dict(rows)
        )


def test_an_int_prompt_is_refused(tmp_path):
    from reinforce_ada.integrations.trl_data import check_prompt

    with pytest.raises(ConfigError, match=r"row 3: the prompt is int 7; it must be text"):
        check_prompt(7, "train_dataset row 3")


@pytest.mark.parametrize("n, what", [(0, "is empty"), (1, "has 1 rows")])
def test_an_empty_or_too_small_dataset_is_refused_not_trained_for_0_steps(tmp_path, n, what):
    """Issue 40: TRL's sampler drops an incomplete batch, so 0 rows or fewer than a batch trained 0 steps, exit 0."""
    model, tok = tiny_model_and_tokenizer()
    with pytest.raises(ConfigError, match=rf"train_dataset {what}, fewer than one generation batch of 2 prompts"):
        AdaGRPOTrainer(
            model=model,
            reward_funcs=even_length,
            args=config(tmp_path),
            train_dataset=tiny_prompts(n),
            processing_class=tok,
        )


# -- a step whose rewards failed ------------------------------------------------------------------------------------
def test_check_verifier_errors_stops_above_the_share_and_names_the_last_checkpoint(tmp_path):
    total = {"samples_generated": 64.0, "verifier_errors": 64.0}
    with pytest.raises(RewardsFailedError, match=f"no checkpoint was saved in {re.escape(str(tmp_path))} yet"):
        check_verifier_errors(total, 0.5, str(tmp_path), step=0)
    (tmp_path / "checkpoint-3").mkdir()
    (tmp_path / "checkpoint-12").mkdir()
    with pytest.raises(RewardsFailedError, match=r"step 13: 64 of 64 samples \(100%\) .*checkpoint-12"):
        check_verifier_errors(total, 0.5, str(tmp_path), step=12)
    check_verifier_errors(total, 1.0, str(tmp_path), step=12)  # 1.0 never stops
    check_verifier_errors({"samples_generated": 64.0, "verifier_errors": 32.0}, 0.5, str(tmp_path), step=0)


def make(tmp_path, reward=even_length, **kw):
    model, tok = tiny_model_and_tokenizer()
    opts = {"max_completion_length": 4, "save_strategy": "no", "logging_steps": 1, "learning_rate": 1e-2, "seed": 0}
    args = config(tmp_path, **{**opts, **kw})
    return AdaGRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=tiny_prompts(16), processing_class=tok
    )


@pytest.mark.slow
def test_a_reward_service_that_dies_stops_training_naming_the_last_checkpoint(tmp_path):
    def dies_after_step_one(completions, trainer_state, **kw):
        if trainer_state.global_step >= 1:
            raise ConnectionError("reward service unreachable")
        return even_length(completions)

    run = dict(max_steps=3, save_strategy="steps", save_steps=1, strategy="uniform")
    trainer = make(tmp_path / "stops", reward=dies_after_step_one, **run)
    with pytest.raises(RewardsFailedError, match=r"step 2: 8 of 8 samples \(100%\).*checkpoint-1 \(fix the reward"):
        trainer.train()
    assert trainer.state.global_step == 1
    tolerant = make(tmp_path / "tolerant", reward=dies_after_step_one, max_verifier_error_share=1.0, **run)
    tolerant.train()
    assert [h["total"]["verifier_errors"] for h in tolerant.ada_history] == [0, 8, 8]


# -- resume -----------------------------------------------------------------------------------------------------------
def checkpoint_with(tmp_path, text: str):
    folder = tmp_path / "checkpoint-1" / "reinforce_ada"
    folder.mkdir(parents=True)
    (folder / "state_rank0.json").write_text(text)
    return tmp_path / "checkpoint-1"


def test_a_valid_state_loads_and_damaged_or_foreign_ones_are_refused_naming_the_file(tmp_path):
    trainer = make(tmp_path / "run", strategy="est")
    good = trainer.ada_state()
    good["strategy"]["memory"]["tracker"]["counts"] = {"p": [1.0, 2.0]}
    good["strategy"]["extra"]["tracker"]["counts"] = {"p": [1.0, 2.0]}  # Est keeps it here too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.load_ada_state(checkpoint_with(tmp_path / "good", json.dumps(good)))
    assert trainer.ada_strategy.memory.tracker.counts == {"p": (1.0, 2.0)}

    nan = json.loads(json.dumps(good))
    nan["strategy"]["memory"]["tracker"]["counts"] = {"p": [math.nan, math.nan]}
    seq = json.loads(json.dumps(good))
    seq["config"]["name"] = "seq"
    bad_shape = json.loads(json.dumps(good))
    bad_shape["strategy"] = {"rng": "x"}
    cases = {
        "truncated": (json.dumps(good)[:-40], "is not valid JSON"),
        "nan": (json.dumps(nan), "it holds NaN, which no reinforce-ada state contains"),
        "other_strategy": (json.dumps(seq), "holds the state of strategy 'seq', but this run's strategy is 'est'"),
        "not_a_state": ("[1, 2]", "is not a reinforce-ada state"),
        "bad_shape": (json.dumps(bad_shape), "the 'est' strategy cannot load this state"),
        "deep": ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    }
    for name, (text, message) in cases.items():
        checkpoint = checkpoint_with(tmp_path / name, text)
        path = checkpoint / "reinforce_ada" / "state_rank0.json"
        with pytest.raises(ConfigError, match=re.escape(str(path)) + ".*" + re.escape(message)):
            trainer.load_ada_state(checkpoint)

    changed = json.loads(json.dumps(good))
    changed["config"]["max_samples"] = 64
    with pytest.warns(UserWarning, match="changed strategy options: max_samples=64 -> 32"):
        trainer.load_ada_state(checkpoint_with(tmp_path / "changed", json.dumps(changed)))


# -- trl refill -------------------------------------------------------------------------------------------------------
# TRL's prompt source (`AdaGRPOTrainer._ada_more`): refills come from prompts not already in the step, and the source
# answers "exhausted" (an empty list) only when the dataset has no other prompt.
def trainer_over(dataset, tmp_path) -> AdaGRPOTrainer:
    model, tok = tiny_model_and_tokenizer()
    args = AdaGRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=4,
        strategy="dynamic",
    )
    return AdaGRPOTrainer(model=model, reward_funcs=even_length, args=args, train_dataset=dataset, processing_class=tok)


def begin_step(trainer, rows):
    prompts = trainer._ada_prompts(rows)
    trainer.ada_strategy.begin(prompts)
    trainer.ada_engine.start(prompts, rows)
    return prompts


def test_one_prompt_refills_come_from_outside_the_step_until_the_dataset_runs_out(tmp_path):
    """32 of 40 rows in the step: each of 8 one-prompt refills gets a fresh prompt, the 9th finds none."""
    data = tiny_prompts(40)
    trainer = trainer_over(data, tmp_path)
    begin_step(trainer, [data[i] for i in range(32)])
    drawn = []
    for _ in range(8):
        (p,) = trainer._ada_more(1)
        assert p.id not in trainer.ada_strategy.prompts
        assert p.id in trainer.ada_engine.rows and p.id in trainer.ada_engine.prompt_ids
        trainer.ada_strategy.add_prompts([p])
        drawn.append(p.id)
    assert len(set(drawn)) == 8
    assert trainer._ada_more(1) == []


def test_a_prompt_the_dataset_holds_twice_is_refilled_once_per_step(tmp_path):
    data = Dataset.from_dict({"prompt": ["<bos>1+1=", "<bos>1+1=", "<bos>2+2=", "<bos>3+3="], "answer": ["2"] * 4})
    trainer = trainer_over(data, tmp_path)
    begin_step(trainer, [data[2]])
    more = trainer._ada_more(3)
    assert sorted(trainer.ada_engine.rows[p.id]["prompt"] for p in more) == ["<bos>1+1=", "<bos>3+3="]
    trainer.ada_strategy.add_prompts(more)
    assert trainer._ada_more(1) == []


def test_the_next_step_draws_the_rows_skipped_this_step_first(tmp_path):
    """A row skipped because its prompt was in the step is not lost for the epoch: it is served in a later draw."""
    data = tiny_prompts(6)
    trainer = trainer_over(data, tmp_path)
    begin_step(trainer, [data[i] for i in range(5)])
    (last,) = trainer._ada_more(1)
    assert trainer.ada_engine.rows[last.id]["prompt"] == data[5]["prompt"]
    trainer.ada_strategy.add_prompts([last])
    assert trainer._ada_more(1) == []
    begin_step(trainer, [data[5]])
    fresh = trainer._ada_more(5)
    assert sorted(trainer.ada_engine.rows[p.id]["prompt"] for p in fresh) == sorted(data[i]["prompt"] for i in range(5))
