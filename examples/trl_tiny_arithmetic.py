"""Reinforce-Ada inside TRL, learning visibly on a CPU: the shipped tiny model on built-in arithmetic.

The model is the package's warm start (a 0.1M-parameter char-level Llama already trained on addition, no download);
the prompts are additions of 3+3 to 4+4 digits, where its pass rate is between about 0.5 and 0.25; the reward is
our arithmetic verifier with TRL's reward signature. AdaGRPOTrainer runs Ada-Seq-balance (rounds of 8 samples, at
most 32, 4 trained per prompt) inside TRL's own loop, loss and optimizer. Every `--eval-every` steps the held-out
accuracy (768 problems never trained on, at temperature 1) is computed exactly (`evaluation.exact`: the probability
that a sample is the answer, no sampling noise), so the curve is the policy's, not the dice's.

    pip install -e ".[trl]"
    python examples/trl_tiny_arithmetic.py            # 40 steps (its time in the last walk: docs/getting-started.md)
    python examples/trl_tiny_arithmetic.py --strategy uniform --run-name grpo   # GRPO-n4 on the same prompts

Recorded on 2 CPU cores (1 torch thread, the defaults, 2026-12-04): held-out accuracy 0.308 at step 0, 0.328 at 10,
0.352 at 20, 0.368 at 30, 0.372 at 40 (+0.064; level 3 0.466 -> 0.563, level 5 0.171 -> 0.243). The per-step
`reward_first_round` (16 prompts) is noisy; the exact held-out curve is the one to read. Runs are seeded: two more
gave the same numbers. How long it takes is measured, not promised: `python -m benchmarks.newcomer` times it (the
last walk's seconds: docs/getting-started.md, "Timings"). At --lr 5e-4 the held-out accuracy fell in the first 10
steps (0.308 -> 0.281).
"""

from __future__ import annotations

import argparse
import time


def arithmetic_data(levels: tuple[int, ...], train_size: int):
    """Training prompts of the given levels as a TRL dataset, and the held-out prompts of the same levels."""
    from datasets import Dataset

    from reinforce_ada.tasks.arithmetic import ArithmeticConfig, make_split

    weights = tuple(1.0 if lv in levels else 0.0 for lv in range(1, 8))
    train, held_out = make_split(ArithmeticConfig(level_weights=weights, train_size=train_size))
    data = Dataset.from_dict({"prompt": [p.text for p in train], "answer": [p.answer for p in train]})
    return data, [p for p in held_out if p.level in levels]


def arithmetic_reward(completions, answer, **kwargs) -> list[float]:
    """TRL's reward signature around `tasks.arithmetic.verify` (1 iff the completion is exactly the sum)."""
    from reinforce_ada.tasks.arithmetic import verify

    return [verify(c, a) for c, a in zip(completions, answer, strict=True)]


def held_out_accuracy(model, tokenizer, prompts) -> dict[str, float]:
    """Exact held-out pass rate at temperature 1, overall and per level."""
    from reinforce_ada.evaluation.exact import exact_pass_rates, summarize_exact

    return summarize_exact(prompts, exact_pass_rates(model, tokenizer, prompts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--strategy", default="seq", choices=["uniform", "dynamic", "seq", "est"])
    ap.add_argument("--lr", type=float, default=1e-4, help="5e-4 overshoots: held-out accuracy fell in 10 steps")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (keep at or below the free cores)")
    ap.add_argument("--run-name", default="ada-seq")
    args = ap.parse_args()

    import warnings

    import torch

    # TRL 1.16 (generation) and peft 0.21 read transformers' deprecated `is_gradient_checkpointing` alias; not our call
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.training.warm_start import SHIPPED_DIR

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_DIR, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_DIR, dtype=torch.float32, local_files_only=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    data, held_out = arithmetic_data(levels=(3, 4, 5), train_size=2048)
    curve = [(0, held_out_accuracy(model, tokenizer, held_out))]

    class HeldOut(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):
            if state.global_step % args.eval_every == 0 or state.global_step == args.steps:
                curve.append((state.global_step, held_out_accuracy(kwargs["model"], tokenizer, held_out)))

    n = 4
    config = AdaGRPOConfig(
        output_dir=f"runs/trl_tiny_arithmetic/{args.run_name}",
        max_steps=args.steps,
        per_device_train_batch_size=args.prompts * n,
        num_generations=n,
        max_completion_length=8,  # the longest sum (5 digits) and <eos>, with room to spare
        temperature=1.0,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        activation_checkpointing=False,  # the new name: TRL's `gradient_checkpointing` default warns in transformers 5
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
        strategy=args.strategy,
        samples_per_round=8,
        max_samples=32,
    )
    trainer = AdaGRPOTrainer(
        model=model,
        reward_funcs=arithmetic_reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=[HeldOut()],
    )
    t0 = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - t0

    logs = [h for h in trainer.state.log_history if "ada/samples_generated" in h]
    print("step  reward_first_round  zero_adv_prompt_share  samples_generated  loss")
    for i, h in enumerate(logs, 1):
        if i % 5 == 0 or i == 1:
            print(
                f"{i:4d}  {h['ada/reward_first_round']:18.3f}  {h['ada/zero_adv_prompt_share']:21.3f}  "
                f"{h['ada/samples_generated']:17.0f}  {h['loss']:.4f}"
            )
    print("held-out accuracy (exact, temperature 1), levels 3-5:")
    for step, m in curve:
        levels = "  ".join(f"L{lv} {m[f'eval_accuracy_L{lv}']:.3f}" for lv in (3, 4, 5))
        print(f"  step {step:3d}: {m['eval_accuracy']:.3f}  ({levels})")
    first, last = curve[0][1]["eval_accuracy"], curve[-1][1]["eval_accuracy"]
    print(f"{args.steps} steps in {elapsed:.0f} s: held-out accuracy {first:.3f} -> {last:.3f} ({last - first:+.3f})")


if __name__ == "__main__":
    main()
