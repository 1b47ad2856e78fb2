"""Built-in tasks and file datasets. `build(task_cfg)` returns (train prompts, held-out prompts, verifier)."""

from __future__ import annotations

from typing import Any

import numpy as np

from reinforce_ada.tasks import arithmetic

__all__ = ["arithmetic", "build"]


def build(task: Any) -> tuple[list, list, Any]:
    from reinforce_ada import verifiers
    from reinforce_ada.models import arithmetic_config
    from reinforce_ada.tasks.files import load_prompts

    if task.name == "arithmetic":
        train, held_out = arithmetic.make_split(arithmetic_config(task))
        return train, held_out, verifiers.get(task.verifier or "arithmetic")
    prompts = load_prompts(task.path, prompt_key=task.prompt_key, answer_key=task.answer_key)
    if task.eval_path:
        held_out = load_prompts(task.eval_path, prompt_key=task.prompt_key, answer_key=task.answer_key)
        train = prompts
    else:
        order = np.random.default_rng(task.seed).permutation(len(prompts))
        n_eval = min(task.eval_size, len(prompts) // 2)
        held_out = [prompts[i] for i in sorted(order[:n_eval])]
        train = [prompts[i] for i in sorted(order[n_eval:])]
    return train, held_out, verifiers.get(task.verifier or "exact")
