"""The streaming driver: one step of sampling over an engine that returns samples as they finish.

The contract, in a few lines:
1) A `StreamingEngine` queues requests (`submit`, one ticket per sample), hands back finished samples (`poll`,
   completion order, mixed prompts), drops a prompt's queued and running samples (`cancel`) and says when it is
   `idle`.
2) `collect_streaming` asks the strategy (`sampling.protocol`) for wanted prompts, then for requests, submits them,
   polls, numbers each sample with its per-prompt submission ordinal (`Sample.index`), scores it, hands it to
   `observe` and cancels what `observe` returns; it stops when the engine is idle and the strategy is done. Every
   submitted sample is accounted for: returned + cancelled == submitted, per prompt, or the step fails.
3) No barrier: a prompt's next batch is requested as soon as its current one is checked, while other prompts are
   still decoding. The round driver (`sampling.rounds`) is this loop over an engine that answers a poll only once
   everything queued has finished, so the strategy is asked for more only when nothing is outstanding.
The result is `sampling.ledger.finish`'s `StepBatch`; ledger extras `cancelled_samples` (dropped queued or in flight)
and `discarded_samples` (arrived after their prompt retired, under `in_flight="cancel"`).

Why checks follow submission order: the paper's stated limitation (v3 Table 3) is that every Seq round waits for its
slowest completion. Here prompts advance independently, but each exit check sees its batch in submission order, so
the sequence of checks -- and each check's pool -- is round mode's even when completion time depends on the answer
(long wrong answers finish late: checking the first M *arrivals* would bias exits toward short answers' rewards).
`prefetch=True` keeps M samples in flight per sampling prompt (Seq). When a check then retires the prompt,
`in_flight` says what happens to the samples already started:
- `"cancel"` (default): they are cancelled (or discarded if already back). Pools, exit outcomes, the unresolved rate
  and the zero-signal rate equal round mode's in law; the price is the cancelled decode work.
- `"keep"`: they join the pool when they arrive. Exit decisions are unchanged (they never see late samples) and so is
  the unresolved rate, but resolved pools grow by up to M: the baseline (pool mean) uses more samples -- late samples
  are independent of the stopping decision, so they pull p_hat from the stopping-biased value toward p -- and the
  random downsample draws from a larger pool. Balanced exits keep their n/2 + n/2 kept groups (late samples only
  add); positive exits can gain a late wrong answer, so fewer all-correct groups give no signal. (Measured at 4000
  prompts, balanced exit, p = 0.3: pool 10.45 +- 0.07 cancel vs 17.42 +- 0.07 keep; pool mean - p +0.026 vs +0.008.)
`prefetch` defaults to False: no prompt has samples in flight when it retires and no decode work is thrown away.
Prefetch pays when slots outnumber the work queued (a step's tail); with a FIFO queue its speculative samples
compete with other prompts' first batches when slots are saturated.
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from reinforce_ada.sampling.ledger import Ledger, PromptSource, StepBatch, Verifier, completion_tokens, finish, score
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.types import Prompt, Request, Sample

METRICS: dict[str, str] = {
    "cancelled_samples": "Only under the streaming driver: samples cancelled while queued or in flight (their prompt "
    "had stopped).",
    "discarded_samples": "Only under the streaming driver: samples that arrived after their prompt stopped and were "
    'thrown away (in_flight="cancel").',
}
"""The ledger extras this driver adds (the round driver leaves them out: never anything to cancel there)."""


class StreamingEngine(Protocol):
    def submit(self, requests: Sequence[Request]) -> list[int]:
        """Queue `k` samples per request; return one ticket per sample (request order), unique for the engine's life.
        `poll` returns each finished sample with its ticket in `Sample.index`."""
        ...

    def poll(self) -> list[Sample]:
        """Samples finished since the last poll, in completion order (blocks until at least one is done, if any
        work is pending; [] when idle)."""
        ...

    def cancel(self, prompt_id: str) -> int:
        """Drop the prompt's queued and in-flight samples; return how many were dropped."""
        ...

    def idle(self) -> bool:
        """Nothing queued or running."""
        ...


def collect_streaming(
    strategy: PoolStrategy,
    engine: StreamingEngine,
    prompts: Sequence[Prompt],
    *,
    verifier: Verifier | None = None,
    more_prompts: PromptSource | None = None,
    in_flight: str = "cancel",
    prefetch: bool = False,
    verifier_timeout_s: float | None = None,
) -> StepBatch:
    """One step of sampling: the loop of the module docstring (2), without a barrier unless the engine has one."""
    if not engine.idle():
        raise RuntimeError("the streaming engine has work from an earlier step; drain it first")
    ledger = Ledger()
    t0 = time.perf_counter()
    strategy.begin(prompts, in_flight=in_flight, prefetch=prefetch)
    owner: dict[int, tuple[str, int]] = {}  # ticket -> (prompt id, per-prompt submission ordinal)
    sent: dict[str, int] = defaultdict(int)
    back: dict[str, int] = defaultdict(int)
    dropped: dict[str, int] = defaultdict(int)
    prefill: dict[str, int] = {}  # prompt id -> its prompt tokens: each distinct prompt prefilled once
    warned = False
    while True:
        want = strategy.wanted_prompts()
        if want:
            if more_prompts is None and not warned:
                warned = True  # said once per step
                name = getattr(getattr(strategy, "cfg", None), "name", None)  # the registry's name, not the class's
                warnings.warn(
                    f"{f'strategy {name!r}' if name else type(strategy).__name__} asked for {want} more prompt(s) "
                    "(candidates to rank, refills or "
                    f"calibration prompts) but no more_prompts source was given: it works with the {len(prompts)} "
                    "offered; pass more_prompts=lambda k: order.take(k, exclude=strategy.prompts) with order a "
                    "`sampling.order.PromptOrder` (docs/python.md), or lambda k: [] to mean none",
                    stacklevel=3,
                )
            strategy.add_prompts(list(more_prompts(want)) if more_prompts else [])
            continue
        _submit(engine, strategy.propose(), owner, sent)
        if engine.idle():
            if strategy.done():
                break
            raise RuntimeError(f"{type(strategy).__name__} is not done but has nothing in flight or to submit")
        samples = engine.poll()
        for s in samples:
            if s.index not in owner:
                raise RuntimeError(f"engine returned ticket {s.index} twice or never issued it")
            pid, ordinal = owner.pop(s.index)
            if pid != s.prompt_id:
                raise RuntimeError(f"ticket {s.index} was issued for {pid!r} but came back for {s.prompt_id!r}")
            s.index = ordinal
            back[pid] += 1
        ledger.verifier_errors += score(samples, strategy.prompts, verifier, verifier_timeout_s)
        ledger.samples_generated += len(samples)
        lengths = [completion_tokens(s) for s in samples]
        ledger.tokens_generated += sum(lengths)
        ledger.prompt_tokens += sum(s.prompt_tokens for s in samples)
        prefill.update((s.prompt_id, s.prompt_tokens) for s in samples)
        ledger.max_completion_tokens = max([ledger.max_completion_tokens, *lengths])
        for pid in strategy.observe(samples):
            dropped[pid] += engine.cancel(pid)
    lost = {pid: n - back[pid] - dropped[pid] for pid, n in sent.items() if n != back[pid] + dropped[pid]}
    if lost:
        raise RuntimeError(f"samples neither returned nor cancelled (prompt: count): {dict(list(lost.items())[:5])}")
    ledger.time_generate_s = time.perf_counter() - t0
    ledger.prefill_tokens = sum(prefill.values())
    batch = finish(strategy, ledger)
    ledger.extra["cancelled_samples"] = sum(dropped.values())
    ledger.extra["discarded_samples"] = strategy.discarded
    return batch


def _submit(
    engine: StreamingEngine, requests: Sequence[Request], owner: dict[int, tuple[str, int]], sent: dict[str, int]
) -> None:
    if not requests:
        return
    tickets = engine.submit(requests)
    if len(tickets) != sum(r.k for r in requests):
        raise RuntimeError(f"engine issued {len(tickets)} tickets for {sum(r.k for r in requests)} samples")
    it = iter(tickets)
    for r in requests:
        for _ in range(r.k):
            owner[next(it)] = (r.prompt.id, sent[r.prompt.id])
            sent[r.prompt.id] += 1
