"""Run AdaGRPOTrainer for two steps under `accelerate launch --multi_gpu --num_processes 2` on CPU (tests/test_trl.py).

usage: accelerate launch --multi_gpu --num_processes 2 tests/trl_two_process.py OUT_DIR RUN [RUN ...]
A RUN is a strategy name (`est`, `seq`, ...), optionally with `-asymmetric`: then rank 0's completions all score 1
(its prompts retire in round 1 under exit=positive) and rank 1's all score 0 (its prompts run to the cap), so the
processes disagree on how many rounds they need. Each process writes OUT_DIR/{RUN}_rank{r}.json: its ledgers per
step (its own and the reduced one), its strategy's prompt memory, and TRL's log history.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the launcher puts only tests/ on the path
from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts  # noqa: E402


def run(out: Path, spec: str) -> None:
    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    strategy, _, variant = spec.partition("-")
    asymmetric = variant == "asymmetric"
    model, tok = tiny_model_and_tokenizer()

    def reward(completions, **kwargs):
        if asymmetric:
            return [1.0 if trainer.accelerator.process_index == 0 else 0.0 for _ in completions]
        return even_length(completions)

    extra = {"exit": "positive", "samples_per_round": 2, "max_samples": 8} if asymmetric else {}
    args = AdaGRPOConfig(
        output_dir=str(out / spec),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        gradient_checkpointing=False,
        learning_rate=1e-2,
        seed=0,
        strategy=strategy,
        budget=9,  # est: an odd total, so rows are padded
        **extra,
    )
    trainer = AdaGRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=tiny_prompts(16), processing_class=tok
    )
    trainer.train()
    acc = trainer.accelerator
    record = {
        "rank": acc.process_index,
        "world": acc.num_processes,
        "backend": str(acc.state.backend),
        "history": trainer.ada_history,
        "memory": trainer.ada_strategy.memory.state_dict(),
        "log_history": trainer.state.log_history,
    }
    (out / f"{spec}_rank{acc.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    torch.set_num_threads(1)
    for spec in sys.argv[2:]:
        run(Path(sys.argv[1]), spec)
