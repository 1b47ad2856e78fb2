"""What a run's steps would cost in seconds: on this CPU (measured) and on a GPU (a model, not a measurement).

Compute-to-target figures should rank arms in a way a user can read against their own hardware. Two cost models
turn a run record of `bench.run.run_job` into one number of seconds per training step:
1) `cpu_step_seconds(record)`: the step times the run measured on this CPU (`time_step_s`: sampling and the update,
   without the bench's evaluations). Here decode is compute-bound: a step costs about its rows x tokens.
2) `gpu_step_seconds(...)` / `gpu_record_seconds(record)`: a memory-bound GPU (`GpuCost`). A decode step reads the
   weights once for every sequence in flight, so its time hardly depends on how many rows share it, and a round
   lasts as long as its longest sequence. For a step with R sequential rounds, S samples, longest completion L tokens
   and T trained tokens:

       generation = sum over rounds r of (round_overhead_s + token_time_s x L_r x ceil(rows_r / slots))
       step       = generation + learner_token_s x T

   The record keeps only the step's longest completion, so every round's L_r is taken as the step's L: an upper
   bound (a late round with few active prompts often ends sooner). Rows per round are the record's `rows_per_round`
   (`Ledger.samples_per_round`); without them (`rows_per_round=None`) the S samples are spread evenly over the R
   rounds, `R x (round_overhead_s + token_time_s x L x ceil(S / (R x slots)))`, which overstates a step whose first
   round is its widest (Seq: 4 rounds of 128, 120, 80, 40 rows are 7 waves of 64 slots, spread evenly 8). Under the
   streaming driver (no barrier) R is the longest chain of a prompt's sequential batches, the critical path of the
   step, so the same formula prices that chain; what streaming saves by overlapping rounds is not credited.
   The learner term counts completion tokens only (`Ledger.tokens_trained`); prompt tokens are left out.
`cumulative(record, model)` sums a model's per-step seconds up to every evaluated step of the record (`eval_step`),
the x axis of a seconds-to-target curve. Pure numpy; every check raises a ValueError naming the field and step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GpuCost:
    """Constants of the memory-bound GPU model. A model, not a measurement: no GPU run of this testbed stands behind
    them; change them to your hardware's numbers (a vLLM log gives tokens/s per sequence and the batch's slots).

    Defaults follow `simulation.stream.Latency`, the latency model of the streaming-vs-round study in BENCHMARKS.md
    (5 ms per decoded token per sequence, 64 decode slots in `simulation.makespan`), plus two terms it leaves out.
    """

    token_time_s: float = 0.005
    """Seconds per decoded token of one sequence while up to `slots` decode together (`Latency.token_time`: 200
    tokens/s per sequence, 1 s for a 200-token completion)."""
    slots: int = 64
    """Sequences decoded at once (`simulation.makespan`'s default slots); more rows wait for another wave."""
    round_overhead_s: float = 0.02
    """Fixed cost of each sequential round: prefill of its prompts, scheduling, the round trip to score it and ask the
    strategy for more. An assumed figure (tens of ms for a few hundred short prompts); `Latency` has no such term."""
    learner_token_s: float = 2.5e-5
    """Learner seconds per trained completion token (forward and backward; 40,000 tokens/s). Chosen so that a full
    GRPO-n4 step (64 rows of 200 tokens: 1 s of decode) spends a quarter of its time in the learner (0.32 s): on a
    GPU the teacher-forced update is compute-bound and runs all tokens at once while decode waits on memory, so
    generation dominates. On this CPU it is the other way round (`benchmarks/results/step_time.json`: train 0.042 s
    vs generate 0.017 s for GRPO-n4 on the testbed; SmolLM2 8.3 s vs 3.4 s in `step_time_smollm2.json`), which is why
    the CPU's own seconds and this model can rank allocators differently."""

    def __post_init__(self) -> None:
        for name in ("token_time_s", "round_overhead_s", "learner_token_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"GpuCost.{name} must be a finite number >= 0, got {v!r}")
        if not (isinstance(self.slots, int) and self.slots >= 1):
            raise ValueError(f"GpuCost.slots must be an integer >= 1, got {self.slots!r}")


def _series(name: str, values: Any, n: int | None = None, unit: str = "step") -> np.ndarray:
    """A finite, non-negative 1-D float array (a scalar becomes one entry), else a ValueError naming `name`."""
    try:
        a = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {values!r}") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D series (one entry per step), got shape {a.shape}")
    if n is not None and len(a) != n:
        raise ValueError(f"{name} has {len(a)} entries but the other series have {n}: one entry per step each")
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}] ({unit} {i + 1}) is {a[i]}: every entry must be a finite number >= 0")
    return a


def gpu_step_seconds(
    rounds: Any,
    max_completion_tokens: Any,
    samples: Any,
    tokens_trained: Any,
    params: GpuCost | None = None,
    rows_per_round: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """Seconds per step under the memory-bound model of the module docstring (one entry per step). `rows_per_round`
    (one list per step, one entry per round) gives each round's waves; None spreads `samples` evenly over rounds.

    >>> float(gpu_step_seconds(1, 200, 64, 12_800)[0])  # GRPO-n4 at full slots: 0.02 + 1.0 decode + 0.32 learner
    1.34
    >>> float(gpu_step_seconds(1, 200, 65, 12_800)[0])  # one row more: a second wave
    2.34
    """
    c = params or GpuCost()
    r = _series("rounds", rounds)
    n = len(r)
    length = _series("max_completion_tokens", max_completion_tokens, n)
    s = _series("samples", samples, n)
    t = _series("tokens_trained", tokens_trained, n)
    no_round = np.flatnonzero((r == 0) & (s > 0))
    if no_round.size:
        i = int(no_round[0])
        raise ValueError(f"rounds[{i}] (step {i + 1}) is 0 but {s[i]:g} samples were generated: rounds must be >= 1")
    if rows_per_round is None:
        waves = r * np.where(r > 0, np.ceil(s / np.maximum(r, 1) / c.slots), 0.0)  # rows spread evenly
    else:
        waves = _waves(rows_per_round, r, c.slots)
    generation = r * c.round_overhead_s + c.token_time_s * length * waves
    return generation + c.learner_token_s * t


def _waves(rows_per_round: Sequence[Sequence[int]], rounds: np.ndarray, slots: int) -> np.ndarray:
    """Decode waves of each step: the sum over its rounds of ceil(rows / slots)."""
    if len(rows_per_round) != len(rounds):
        raise ValueError(f"rows_per_round has {len(rows_per_round)} steps but the other series have {len(rounds)}")
    out = np.zeros(len(rounds))
    for i, rows in enumerate(rows_per_round):
        a = _series(f"rows_per_round[{i}]", rows, unit="round") if len(rows) else np.zeros(0)
        if len(a) != rounds[i]:
            raise ValueError(
                f"rows_per_round[{i}] (step {i + 1}) lists {len(a)} rounds but rounds[{i}] is {rounds[i]:g}"
            )
        out[i] = np.ceil(a / slots).sum()
    return out


def _steps(record: Mapping[str, Any], key: str) -> Any:
    if key not in record:
        made = "; it was made before bench.run kept this series, so rerun it" if key in GPU_SERIES else ""
        raise ValueError(f"run record {record.get('key', '?')!r} has no per-step series {key!r}{made}")
    return record[key]


def cpu_step_seconds(record: Mapping[str, Any]) -> np.ndarray:
    """The seconds each step took on the machine that ran it (`time_step_s`; read with `record['load']`)."""
    return _series("time_step_s", _steps(record, "time_step_s"))


GPU_SERIES = ("rounds", "max_completion_tokens", "samples_per_step", "tokens_trained")
"""The record's per-step series `gpu_record_seconds` reads (names as in `bench.run.SERIES`)."""


def gpu_record_seconds(record: Mapping[str, Any], params: GpuCost | None = None) -> np.ndarray:
    """`gpu_step_seconds` over a run record's own series (its `rows_per_round` where it has them)."""
    return gpu_step_seconds(*(_steps(record, k) for k in GPU_SERIES), params, record.get("rows_per_round"))


CostModel = Callable[[Mapping[str, Any]], np.ndarray]
MODELS: dict[str, CostModel] = {"cpu": cpu_step_seconds, "gpu": gpu_record_seconds}
"""Cost models by name; each maps a run record to seconds per step (entry i is step i + 1)."""


def cumulative(record: Mapping[str, Any], model: str | CostModel = "cpu") -> list[float]:
    """Seconds spent before each evaluation of the record: entry j sums steps 1..eval_step[j] (0.0 at step 0)."""
    if isinstance(model, str):
        if model not in MODELS:
            raise ValueError(f"unknown cost model {model!r}; use one of {sorted(MODELS)} or a function of a record")
        model = MODELS[model]
    per_step = _series("step seconds", model(record))
    at: Sequence[Any] = _steps(record, "eval_step")
    steps = record.get("steps", len(per_step))
    if len(per_step) != steps:
        raise ValueError(f"the cost model gave {len(per_step)} step times for a record of {steps} steps")
    total = np.concatenate([[0.0], np.cumsum(per_step)])
    out = []
    for j, s in enumerate(at):
        if not (isinstance(s, int | np.integer) and 0 <= s <= len(per_step)):
            raise ValueError(f"eval_step[{j}] is {s!r}: evaluation steps must be integers in 0..{len(per_step)}")
        out.append(float(total[s]))
    return out
