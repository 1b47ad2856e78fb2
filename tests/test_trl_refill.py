"""TRL's prompt source (`AdaGRPOTrainer._ada_more`): refills come from prompts not already in the step, and the source
answers "exhausted" (an empty list) only when the dataset has no other prompt."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("accelerate")

from datasets import Dataset  # noqa: E402

from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer  # noqa: E402
from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts  # noqa: E402

pytestmark = pytest.mark.slow  # TRL / Ray start-up: the full suite runs these, the quick loop does not


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
