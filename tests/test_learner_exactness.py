"""The learner computes what the sampler sampled (issue 21 items 4 and 5): gradient accumulation over micro-batches
equals the full batch when completions are empty, and dropout is off in the learner so the on-policy PPO ratio is 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reinforce_ada.training.config import TrainConfig, apply_overrides
from reinforce_ada.training.trainer import Row, Trainer


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_llama, char_tokenizer) -> Path:
    d = tmp_path_factory.mktemp("tiny_model")
    tiny_llama.save_pretrained(d)
    char_tokenizer.save_pretrained(d)
    return d


def _cfg(model_dir: Path, run_dir: Path, **optim) -> TrainConfig:
    return apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 16, "eval_size": 2},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(run_dir), "steps": 1, "batch_size": 4, "eval_every": 0, "progress": False},
            "strategy": {"samples_per_round": 4, "max_samples": 8},
            "optim": optim,
        },
        "test",
    )


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_accumulation_with_empty_completions(model_dir, tmp_path, agg):
    lengths = [2, 0, 3, 0, 0, 0, 1]  # micro-batches of 2: [2, 0], [3, 0], [0, 0] (only empty), [1]
    rows = [Row([2, 5, 6], [7] * n, [-1.0] * n, float(i % 3 - 1) or 0.5, 1.0 + i % 2) for i, n in enumerate(lengths)]
    grads = []
    for mbs in (7, 2):
        tr = Trainer(_cfg(model_dir, tmp_path / f"r{mbs}", micro_batch_size=mbs, agg=agg), tensorboard=False)
        loss, _, _, ok = tr.accumulate(rows)
        assert ok and torch.isfinite(torch.tensor(loss))
        grads.append(torch.cat([p.grad.flatten() for p in tr.params]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    tr.opt.zero_grad(set_to_none=True)
    assert tr.accumulate([Row([2, 5], [], [], 1.0, 1.0)] * 3) == (0.0, 0.0, 0.0, True)  # nothing to learn from
    assert all(p.grad is None for p in tr.params)
