"""What a training config costs, checked when the config is built (before any model, data or worker is touched).

One option's own range is checked where it is declared; what it costs depends on others too, so the sums and products
are checked here, against the memory this process can really get (`cpu_load.usable_memory`: free memory, its own
`ulimit`s and its cgroup's limit, not the machine's total):
1) a step's draws: `run.batch_size` prompts x the most samples the strategy may draw for one prompt in a step
   (`cost_hint`: n, or max_samples, n x max_gen_batches for dynamic sampling), capped by `budget` where the strategy
   has one, each sample holding up to `generation.max_new_tokens` tokens (`evaluation.metrics.sample_bytes`). They
   are held at once, so `--strategy spo --n 2**63-1` used to run until a range of 2**63 tickets overflowed, and
   `--strategy uniform --n 10**12` until a MemoryError;
2) options whose value sizes memory with the batch (`MEMORY_SIZED`: the difficulty predictor, candidate prompts
   drawn per step, calibration prompts).
Each refusal names the options, the estimate, the memory and the largest value that fits.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.cpu_load import usable_memory
from reinforce_ada.errors import ConfigError

MEMORY_SIZED = {
    "predictor_dim": (lambda v, batch: 32 * v, "the difficulty predictor's float64 weights (about 4 copies: state)"),
    "candidates": (lambda v, batch: 1024 * v * batch, "candidate prompts drawn per step (about 1 KB each)"),
    "calibration_prompts": (lambda v, batch: 1024 * v, "calibration prompts held (about 1 KB each)"),
}
"""Strategy options whose value sizes memory: option -> (bytes at value v with run.batch_size batch, what they are)."""


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n < 2**40 else f"{n / 2**30:.3g} GiB"


def check_memory_sized(options: Any, batch: int) -> None:
    """Refuse an option that would need more memory than this process can get (10**9 used to fail with MemoryError
    after minutes), naming it and the largest value that fits."""
    memory = usable_memory()
    for name, (bytes_at, what) in MEMORY_SIZED.items():
        value = getattr(options, name, None)
        if isinstance(value, int) and bytes_at(value, batch) > memory:
            fits = memory // max(1, bytes_at(1, batch))
            raise ConfigError(
                f"strategy.{name}={value}: {what} would need about {_gib(bytes_at(value, batch))}, more than the "
                f"{_gib(memory)} this process can get; the largest {name} here is {fits}"
            )


def step_draws(cls: Any, options: Any, batch: int) -> float:
    """The most samples one training step may draw (module docstring, 1)."""
    draws = batch * float(cls.cost_hint(options))
    budget = getattr(options, "budget", None)
    return min(draws, float(budget)) if isinstance(budget, int) and budget > 0 else draws


def check_step_draws(
    cls: Any, options: Any, batch: int, max_new_tokens: int, batch_flag: str = "run.batch_size"
) -> None:
    """Refuse a config whose step may draw more samples than this process can hold (module docstring, 1), naming
    the option that sets the samples per prompt and its largest value that fits with this batch size (`batch_flag`:
    how the caller spells the batch size; `simulate` passes `--batch-size` and 0 tokens)."""
    from reinforce_ada.evaluation.metrics import sample_bytes

    draws = step_draws(cls, options, batch)
    each = sample_bytes(max_new_tokens)
    memory = usable_memory()
    if draws * each <= memory:
        return
    per_prompt = float(cls.cost_hint(options))
    names = [k for k in ("max_samples", "n") if isinstance(getattr(options, k, None), int)]
    name = max(names, key=lambda k: getattr(options, k)) if names else "n"
    value = getattr(options, name, per_prompt)
    fits = int(value * (memory / (batch * each)) / per_prompt) if per_prompt > 0 else 0
    tokens = f" and generation.max_new_tokens={max_new_tokens}" if max_new_tokens else ""
    raise ConfigError(
        f"strategy.{name}={value} with {batch_flag}={batch}{tokens}: a step may draw up to {draws:.4g} samples "
        f"({batch} prompts x {per_prompt:.4g}){f' of up to {max_new_tokens} tokens' if tokens else ''}, held at "
        f"once: about {_gib(draws * each)}, more than the {_gib(memory)} this process can get; the largest {name} "
        f"here is {fits} (or lower {batch_flag}{' or generation.max_new_tokens' if tokens else ''})"
    )
