"""Your own data and reward through TRL: a JSONL with its own column names, a reward function of yours, LoRA, CPU.

    python examples/trl_own_data.py --model models/smollm2     # SmolLM2-135M-Instruct (reinforce-ada models smollm2)

The same run as docs/own-data.md ("Train your own model on your own data"), through `AdaGRPOTrainer` (trl 1.16):
`processing_class` is the model's tokenizer, `peft_config` adds LoRA, `use_cpu=True` keeps it off any GPU. On 2 CPU
cores a SmolLM2 step (2 prompts, Ada-Seq up to 32 samples each, 64 tokens) takes minutes; `--steps` sets how many.
"""

from __future__ import annotations

import argparse
import re

from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoTokenizer

from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer


def last_number(completions: list[str], gold: list[str], **_: object) -> list[float]:
    """Your reward: 1.0 when a completion's last number is the `gold` column's answer (TRL passes columns by name)."""
    found = [re.findall(r"-?\d+", c.replace(",", "")) for c in completions]
    return [float(bool(n) and n[-1] == g) for n, g in zip(found, gold, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="models/smollm2", help="a local Hugging Face model folder")
    ap.add_argument("--data", default="examples/data/word_problems.jsonl", help="JSONL with question/gold columns")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", default="runs/ada-trl-own")
    a = ap.parse_args()
    data = load_dataset("json", data_files=a.data, split="train")
    data = data.rename_column("question", "prompt")  # TRL reads `prompt`; the other columns reach the reward
    args = AdaGRPOConfig(
        output_dir=a.out,
        use_cpu=True,
        max_steps=a.steps,
        num_generations=4,  # n: the group trained on per prompt
        per_device_train_batch_size=8,  # completions trained per step: 2 prompts x 4
        max_completion_length=64,
        activation_checkpointing=False,
        report_to="none",
        logging_steps=1,
        strategy="seq",  # Ada-Seq-balance, the paper's preset
        samples_per_round=8,
        max_samples=32,
    )
    AdaGRPOTrainer(
        model=a.model,
        processing_class=AutoTokenizer.from_pretrained(a.model),
        reward_funcs=last_number,
        args=args,
        train_dataset=data,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    ).train()


if __name__ == "__main__":
    main()
