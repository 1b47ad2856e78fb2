"""What a run's steps would cost in seconds: on this CPU (measured) and on a GPU (a model fitted to the paper's
measured step times, not a measurement of ours).

Compute-to-target figures should rank arms in a way a user can read against their own hardware. Two cost models
turn a run record of `bench.run.run_job` into one number of seconds per training step:
1) `cpu_step_seconds(record)`: the step times the run measured on this CPU (`time_step_s`: sampling and the update,
   without the bench's evaluations). Here decode is compute-bound: a step costs about its rows x tokens.
2) `gpu_step_seconds(rows_per_round, trained, cost)` / `gpu_record_seconds(record)`: a synchronous round-based
   rollout on a GPU (`GpuCost`), every round run as it runs. A decode step of a round reads the weights once for
   every sequence in flight, so it costs `decode_step_s` whatever its rows, plus `row_token_s` per sequence; a round
   lasts until its longest completion (the straggler) is done. For a step whose round r decodes R_r rows and which
   trains T samples:

       round_r = round_s + [r = 0] prefill_s + decode_step_s x D(R_r) + row_token_s x R_r x mean_len
       step    = sum_r round_r + step_s + learner_token_s x T x mean_len

   - Prefix cached: only the first round prefills the step's prompts; a later round re-asks prompts whose prefix the
     engine keeps, so it starts decoding at once.
   - Fewer rows: a later round's rows cost only their own tokens (`row_token_s`), not the first round's.
   - The longest straggler: D(R) is the expected longest of R completion lengths drawn from a lognormal of mean
     `mean_tokens` and log-sd `length_sigma`, cut at `max_tokens` (`expected_longest`): it grows with the rows and
     stops at the cap. Rows beyond `slots` wait for a free slot: D(R) = E[longest of slots] + (R - slots) x
     mean_len / slots (the queue drains at `slots` sequences a step).
   mean_len is the capped distribution's mean. `step_s` is what a step pays once, neither per round nor per
   trained token (the driver's bookkeeping, moving the weights to the rollout engine, amortised evaluation and
   checkpoints): Table 3 cannot be read without it (the fit: `studies/compute_to_target/gpu_paper.py`, outside the
   wheel).
   Where this departs from the paper's setting and why: the lengths are one distribution for every round, although a
   later round's rows are prompts that failed so far, whose completions run longer (no figure of the paper gives
   them); rows per round are expectations (the fit reads them from the planner).
3) The defaults are the paper's 1.5B setting on 8 x H100 (Table 3), fitted in the study's `gpu_paper.py`: decode_step_s,
   row_token_s and step_s to GRPO's 102 s, Est's 128 s and Seq-pos's 228 s; the learner to the paper's 15 s actor
   update of GRPO's step; the rest assumed. Seq-balance (290 s) is the check: the model gives 2.38x against the
   paper's 2.84x. The old model priced every round like the first (3.5x for both Seq variants). The 7B row, carried
   over by scaling the rollout to its GRPO step, holds for Est (-11%) and not for Seq (+28%, +37%): stated in
   `gpu_paper.py`, not tuned away.
4) A testbed record is priced as the paper's setting would pay for its steps: each row stands for `ROW_SCALE` rows
   (512 prompts a step in the paper, 16 in the studies) and each of its rows is a completion of the paper's length
   model; the testbed's own completion lengths (a few tokens of arithmetic) do not enter. Under the streaming driver
   (no barrier) a record's rounds are its prompts' sequential batches, so the same formula prices that chain; what
   streaming saves by overlapping rounds is not credited.
`cumulative(record, model)` sums a model's per-step seconds up to every evaluated step of the record (`eval_step`),
the x axis of a seconds-to-target curve. Pure numpy; every check raises a ValueError naming the field and step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

ROW_SCALE = 32
"""Rows of the paper's step one testbed row stands for: its 512 prompts a step over the studies' 16."""


@dataclass(frozen=True)
class GpuCost:
    """Constants of the GPU model (module docstring), in seconds and tokens. Defaults: the paper's Qwen2.5-Math-1.5B
    on 8 x H100 (V3 Table 3), fitted where it says so (`gpu_paper.fit` in `studies/compute_to_target/` gives them
    again); change them to your hardware's numbers (a vLLM log gives the decode step's time and its batch; a
    trainer's timings the rest)."""

    decode_step_s: float = 0.01805
    """Fitted (GRPO, Est, Seq-pos): seconds of one decode step of a round, whatever its rows (memory-bound: the
    weights are read once per step). A round of 2048-token stragglers spends 37 s here."""
    row_token_s: float = 8.962e-6
    """Fitted (GRPO, Est, Seq-pos): seconds per decoded token of each sequence in flight (the compute and the KV
    reads that grow with the batch): 5.4 ms a row of mean length, 11 s for GRPO's 2048 rows."""
    step_s: float = 38.04
    """Fitted (Seq-pos, with GRPO and Est): seconds a step pays once, beside its rounds and its learner (module
    docstring). Without it no setting reproduces Table 3: both Seq variants come out 3.4-3.5x."""
    learner_token_s: float = 1.222e-5
    """From the paper: the actor update is 15 s of GRPO's 102 s at 2048 trained rows of mean length; seconds per
    trained completion token (forward and backward)."""
    slots: int = 8192
    """Assumed: sequences decoded at once (8 engines of vLLM's 1024 running sequences); more rows queue."""
    mean_tokens: float = 600.0
    """Assumed: mean completion length before the cap (a few hundred tokens of step-by-step math). With
    `length_sigma` it shapes the straggler; Table 3's check moves by less than 0.1 over 300-800 tokens and
    log-sd 0.3-1.0 (`studies/compute_to_target/tests/test_gpu_paper.py`)."""
    length_sigma: float = 0.5
    """Assumed: log-sd of the lognormal completion length."""
    max_tokens: int = 2048
    """The paper's cap on a completion (max response length 2048): the longest straggler stops here."""
    prefill_s: float = 1.0
    """Assumed: the first round's prefill of the step's prompts (512 of ~200 tokens); later rounds hit the prefix
    cache. Table 3 cannot tell it from `step_s` (both once a step): only their sum is fitted."""
    round_s: float = 0.0
    """Assumed: a round's own overhead beside its decode (launch, scoring round trip). Table 3 cannot tell it from
    `decode_step_s` while every round's straggler reaches the cap, so it is folded in there."""
    prefill_token_s: float = 9.766e-6
    """Assumed: `prefill_s` over the paper's 512 prompts of about 200 tokens: seconds per prefilled prompt token,
    what `gpu_length_seconds` charges for each distinct prompt a step samples."""

    def __post_init__(self) -> None:
        for name in (
            "decode_step_s",
            "row_token_s",
            "step_s",
            "learner_token_s",
            "prefill_s",
            "round_s",
            "prefill_token_s",
        ):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"GpuCost.{name} must be a finite number >= 0, got {v!r}")
        for name in ("mean_tokens", "length_sigma"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"GpuCost.{name} must be a finite number > 0, got {v!r}")
        for name in ("slots", "max_tokens"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"GpuCost.{name} must be an integer >= 1, got {v!r}")
        if self.max_tokens > 1_000_000:
            raise ValueError(f"GpuCost.max_tokens is {self.max_tokens}: the length model sums over tokens up to 1e6")


@lru_cache(maxsize=64)
def _cdf(cost: GpuCost) -> np.ndarray:
    """P(length <= x) for x = 0 .. max_tokens - 1 under the lognormal (the cap takes the rest of the mass)."""
    mu = math.log(cost.mean_tokens) - cost.length_sigma**2 / 2  # the lognormal's log-mean for that mean
    x = np.arange(cost.max_tokens, dtype=float)
    z = (np.log(np.maximum(x, 1e-300)) - mu) / (cost.length_sigma * math.sqrt(2))
    return np.where(x > 0, 0.5 * (1 + np.vectorize(math.erf)(z)), 0.0)


def mean_length(cost: GpuCost) -> float:
    """Mean completion length under the cap: sum over x < cap of P(length > x)."""
    return float(np.sum(1 - _cdf(cost)))


@lru_cache(maxsize=4096)
def expected_longest(rows: int, cost: GpuCost) -> float:
    """E[longest of `rows` completion lengths] (tokens; 0 for no rows): sum over x < cap of 1 - P(length <= x)^rows.

    >>> c = GpuCost()
    >>> round(expected_longest(1, c)), round(expected_longest(64, c)), round(expected_longest(4096, c))
    (599, 1680, 2048)
    """
    if rows <= 0:
        return 0.0
    return float(np.sum(1 - _cdf(cost) ** rows))


def decode_steps(rows: int, cost: GpuCost) -> float:
    """Decode steps of a round of `rows` sequences: its straggler, plus the queue's drain past `slots`."""
    if rows <= cost.slots:
        return expected_longest(rows, cost)
    return expected_longest(cost.slots, cost) + (rows - cost.slots) * mean_length(cost) / cost.slots


def round_seconds(rows: float, cost: GpuCost, first: bool) -> float:
    """Seconds of one round of `rows` rows (module docstring); the first round pays the prefill. Fractional rows (an
    expectation) take the straggler of the nearest whole count.

    >>> c = GpuCost()
    >>> round(round_seconds(2048, c, True), 1), round(round_seconds(180, c, False), 1)  # GRPO's round, Seq-pos's 4th
    (49.0, 35.3)
    """
    n = int(round(rows))
    decode = cost.decode_step_s * decode_steps(n, cost) + cost.row_token_s * rows * mean_length(cost)
    return cost.round_s + (cost.prefill_s if first else 0.0) + decode


def _series(name: str, values: Any, n: int | None = None, unit: str = "step") -> np.ndarray:
    """A finite, non-negative 1-D float array (a scalar becomes one entry), else a ValueError naming `name`."""
    try:
        a = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {values!r}") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D series (one entry per {unit}), got shape {a.shape}")
    if n is not None and len(a) != n:
        raise ValueError(f"{name} has {len(a)} entries but the other series have {n}: one entry per step each")
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}] ({unit} {i + 1}) is {a[i]}: every entry must be a finite number >= 0")
    return a


def gpu_step_seconds(
    rows_per_round: Sequence[Sequence[float]], trained: Any, cost: GpuCost | None = None, *, row_scale: float = 1
) -> np.ndarray:
    """Seconds per step under the GPU model of the module docstring (one entry per step): `rows_per_round` holds
    one list per step (rows decoded in each sequential round), `trained` the samples each step trains; both are
    multiplied by `row_scale` first.

    >>> [round(float(s)) for s in gpu_step_seconds([[2048], [4096, 894, 360, 180]], [2048, 2048])]  # GRPO, Seq-pos
    [102, 228]
    """
    c = cost or GpuCost()
    t = _series("trained", trained)
    if len(rows_per_round) != len(t):
        raise ValueError(f"rows_per_round has {len(rows_per_round)} steps but trained has {len(t)}")
    if not (isinstance(row_scale, int | float) and math.isfinite(row_scale) and row_scale > 0):
        raise ValueError(f"row_scale must be a finite number > 0, got {row_scale!r}")
    out = c.step_s + c.learner_token_s * mean_length(c) * t * row_scale
    memo: dict[tuple[float, bool], float] = {}
    for i, rows in enumerate(rows_per_round):
        a = _series(f"rows_per_round[{i}]", rows, unit="round") * row_scale if len(rows) else np.zeros(0)
        for j, r in enumerate(a.tolist()):
            key = (r, j == 0)
            if key not in memo:
                memo[key] = round_seconds(r, c, j == 0)
            out[i] += memo[key]
    return out


def _steps(record: Mapping[str, Any], key: str) -> Any:
    if key not in record:
        late = (*GPU_SERIES, "longest_per_round", "prefill_tokens_per_step")
        made = "; it was made before bench.run kept this series, so rerun it" if key in late else ""
        raise ValueError(f"run record {record.get('key', '?')!r} has no per-step series {key!r}{made}")
    return record[key]


def cpu_step_seconds(record: Mapping[str, Any]) -> np.ndarray:
    """The seconds each step took on the machine that ran it (`time_step_s`; read with `record['load']`)."""
    return _series("time_step_s", _steps(record, "time_step_s"))


GPU_SERIES = ("rows_per_round", "samples_trained")
"""The record's per-step series `gpu_record_seconds` reads (names as in `bench.run`: rows decoded per sequential
round, one list per step, and the samples trained)."""


def gpu_record_seconds(
    record: Mapping[str, Any], cost: GpuCost | None = None, row_scale: float = ROW_SCALE
) -> np.ndarray:
    """`gpu_step_seconds` over a run record's own series, each testbed row standing for `row_scale` rows of the
    paper's step (module docstring, 4); the learner is charged once per update over the batch (`epochs`, the run's
    `optim.epochs`: 1 in records made before it was kept)."""
    rows, trained = (_steps(record, k) for k in GPU_SERIES)
    epochs = _epochs(record)
    return gpu_step_seconds(rows, _series("samples_trained", trained) * epochs, cost, row_scale=row_scale)


def _epochs(record: Mapping[str, Any]) -> int:
    """The run's updates per batch (`optim.epochs`; 1 where the record predates it); anything else is an error."""
    e = record.get("epochs", 1)
    if isinstance(e, bool) or not isinstance(e, int) or e < 1:
        raise ValueError(f"run record {record.get('key', '?')!r}: epochs = {e!r}; an integer >= 1")
    return e


class UnpricedPrior(ValueError):
    """A run whose prior pass (`bench.run.prior_pass`) has no price on a cost model: its CPU seconds were not timed
    (records made before `bench.run` timed them). That arm has no factor on the axis; the other arms keep theirs."""


def prior_seconds(record: Mapping[str, Any], model: str) -> float:
    """The seconds a run's prior pass costs before step 1 (0.0 without one): on "cpu" the pass's measured seconds; on
    "gpu" one rollout round of all its samples that trains nothing, each testbed row standing for `ROW_SCALE` rows
    (as `gpu_record_seconds` prices a step)."""
    prior = record.get("prior") or {}
    samples = prior.get("samples") or 0
    if not samples:
        return 0.0
    if model == "gpu":
        return float(gpu_step_seconds([[samples]], [0], row_scale=ROW_SCALE)[0])
    if model == "gpu_len":  # one round of the pass's own samples, priced by their lengths; nothing trained
        c = GpuCost()
        longest, prefill = prior.get("longest"), prior.get("prefill_tokens")
        if longest is None or prefill is None:
            raise UnpricedPrior(
                f"run record {record.get('key', '?')!r}: its prior pass keeps no lengths (made before bench.run kept "
                "them), so the length model cannot price it"
            )
        return c.round_s + c.decode_step_s * longest + c.row_token_s * prior["tokens"] + c.prefill_token_s * prefill
    if model == "cpu":
        if prior.get("seconds") is None:
            raise UnpricedPrior(
                f"run record {record.get('key', '?')!r}: its prior pass ({samples} samples) has no recorded seconds "
                "(made before bench.run timed the pass), so its CPU cost cannot be charged"
            )
        return float(prior["seconds"])
    raise ValueError(f"unknown cost model {model!r} for a prior pass; use 'cpu' or 'gpu'")


CostModel = Callable[[Mapping[str, Any]], np.ndarray]


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


LENGTH_SERIES = ("longest_per_round", "tokens_per_step", "prefill_tokens_per_step", "tokens_trained")
"""The record's per-step series `gpu_length_seconds` reads (`bench.run`): each round's longest completion, the
step's generated tokens, its distinct prompts' tokens and its trained completion tokens."""


def gpu_length_seconds(record: Mapping[str, Any], cost: GpuCost | None = None) -> np.ndarray:
    """Seconds per step of a run record priced from its samples' own lengths (issue: where the tokens are), with the
    GPU model's constants: a round decodes for as many steps as its longest completion, every generated token costs
    `row_token_s`, every distinct prompt's tokens are prefilled once (`prefill_token_s`), every trained token costs
    `learner_token_s`, and the step pays `step_s`:

        step = step_s + prefill_token_s x prefill + sum_r (round_s + decode_step_s x longest_r)
               + row_token_s x generated + learner_token_s x trained x epochs

    Where it departs from `gpu_record_seconds`: nothing is assumed of the lengths (no lognormal, no cap, no row
    scaling: the record is priced as it ran, at its own rows); rows beyond `slots` are not queued (a testbed step is
    far below it); a round's tokens are not split out, so `row_token_s` is charged on the step's total.

    What it measures at testbed scale: `step_s` (fitted to the paper's 512-prompt steps) is charged whole on every
    step while the length terms are the record's own, so with answers of tens of tokens and 16-64 rows a step it is
    94-96% of the price (the long-answer testbed's runs, GRPO-n4 and SPO-64 alike): the axis then ranks arms by their
    steps to target, and a length lever shows only through the steps it adds or saves. It prices lengths where a
    step's decode and tokens are a real share of it: answers in the hundreds of tokens, or steps of hundreds of rows.

    >>> rec = {"longest_per_round": [[10, 4]], "tokens_per_step": [100], "prefill_tokens_per_step": [50],
    ...        "tokens_trained": [80]}
    >>> c = GpuCost(step_s=1.0, decode_step_s=0.1, row_token_s=0.01, learner_token_s=0.001, prefill_token_s=0.002)
    >>> round(float(gpu_length_seconds(rec, c)[0]), 4)  # 1 + 0.1 + 1.4 + 1.0 + 0.08
    3.58
    """
    c = cost or GpuCost()
    longest, generated, prefill, trained = (_steps(record, k) for k in LENGTH_SERIES)
    g = _series("tokens_per_step", generated)
    p = _series("prefill_tokens_per_step", prefill, len(g))
    t = _series("tokens_trained", trained, len(g)) * _epochs(record)  # the learner passes over them once per update
    if len(longest) != len(g):
        raise ValueError(f"longest_per_round has {len(longest)} steps but tokens_per_step has {len(g)}")
    out = c.step_s + c.prefill_token_s * p + c.row_token_s * g + c.learner_token_s * t
    for i, rounds in enumerate(longest):
        a = _series(f"longest_per_round[{i}]", rounds, unit="round") if len(rounds) else np.zeros(0)
        out[i] += len(a) * c.round_s + c.decode_step_s * float(a.sum())
    return out


MODELS: dict[str, CostModel] = {"cpu": cpu_step_seconds, "gpu": gpu_record_seconds, "gpu_len": gpu_length_seconds}
"""Cost models by name; each maps a run record to seconds per step (entry i is step i + 1)."""
