"""What `benchmarks.speed` measures (P5: our GRPO step vs TRL's; P6: our engines vs `model.generate`), in one place
both halves read (`benchmarks.grpo_vs_trl` runs P5)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """What one run measures; `--quick` shrinks the step and repeat counts only, never the workloads."""

    batch_prompts: int = 32
    """P5: prompts per optimizer step (B)."""
    group: int = 4
    """P5: completions per prompt (GRPO n)."""
    max_new_tokens: int = 8
    """P5 and P6: longest completion."""
    warmup_steps: int = 2
    """P5: first steps of each trainer that are not timed."""
    steps: int = 20
    """P5: timed steps per trainer and round."""
    rounds: int = 5
    """P5: fresh (ours, TRL) trainer pairs, run alternately so that drift on a shared machine hits both."""
    repeats: int = 15
    """P6: timed calls per side and workload (after one warm-up call each)."""
    workloads: tuple[tuple[str, int, int], ...] = (("grpo-like", 32, 8), ("seq-like", 128, 8))
    """P6: (name, prompts, samples per prompt)."""
    smollm2_workloads: tuple[tuple[str, int, int], ...] = (("smollm2 grpo-like", 8, 4), ("smollm2 seq-like", 16, 8))
    """P6 with `--smollm2`: (name, prompts, samples per prompt) on SmolLM2-135M-Instruct, chat-templated questions."""
    smollm2_max_new_tokens: int = 32
    """P6 with `--smollm2`: longest completion."""
    smollm2_repeats: int = 3
    """P6 with `--smollm2`: timed calls per side and workload."""
    threads: int = 2
    """torch CPU threads for every measured run."""
    seed: int = 0


QUICK = Settings(steps=3, rounds=1, repeats=2)
