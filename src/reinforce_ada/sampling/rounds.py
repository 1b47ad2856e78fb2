"""The round driver: one step of sampling in synchronous rounds, over any engine with `generate(requests)`.

The contract, in a few lines:
1) An `Engine` returns `k` samples per request, grouped in request order (`reward` None unless it scores itself).
2) `collect` runs the streaming driver's loop (`sampling.streaming.collect_streaming`) over `Barrier(engine)`: a poll
   hands everything queued to one `generate` call and returns all of it. So the strategy is asked for more only once
   every outstanding sample has arrived -- the paper's rounds, each waiting for its slowest completion -- and it sees
   the same protocol calls, ordinals and ledger as under streaming; nothing is ever cancelled, so the ledger
   leaves out streaming's `cancelled_samples` and `discarded_samples`.
Every strategy therefore runs unchanged on the simulated policy, a Hugging Face engine or vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from reinforce_ada.sampling.ledger import PromptSource, StepBatch, Verifier
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.types import Prompt, Request, Sample


class Engine(Protocol):
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """Return `k` samples per request, grouped in request order. `reward` is None unless the engine scores."""
        ...


class Barrier:
    """A `StreamingEngine` over `generate`: `poll` runs everything queued as one call and returns all of it."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.queue: list[tuple[Request, int]] = []
        """Queued requests with the ticket of their first sample."""
        self.next_ticket = 0

    def submit(self, requests: Sequence[Request]) -> list[int]:
        start = self.next_ticket
        for r in requests:
            self.queue.append((r, self.next_ticket))
            self.next_ticket += r.k
        return list(range(start, self.next_ticket))

    def poll(self) -> list[Sample]:
        queued, self.queue = self.queue, []
        requests = [r for r, _ in queued]
        expected = sum(r.k for r in requests)
        samples = self.engine.generate(requests) if requests else []
        if len(samples) != expected:
            raise RuntimeError(f"engine returned {len(samples)} samples for {expected} requested")
        tickets = (first + j for r, first in queued for j in range(r.k))
        for s, ticket in zip(samples, tickets, strict=True):
            s.index = ticket
        return samples

    def cancel(self, prompt_id: str) -> int:
        dropped = sum(r.k for r, _ in self.queue if r.prompt.id == prompt_id)
        self.queue = [q for q in self.queue if q[0].prompt.id != prompt_id]
        return dropped

    def idle(self) -> bool:
        return not self.queue


def collect(
    strategy: PoolStrategy,
    engine: Engine,
    prompts: Sequence[Prompt],
    *,
    verifier: Verifier | None = None,
    more_prompts: PromptSource | None = None,
    verifier_timeout_s: float | None = None,
) -> StepBatch:
    """Run the strategy's rounds to completion and return groups, advantages, weights and the ledger."""
    batch = collect_streaming(
        strategy,
        Barrier(engine),
        prompts,
        verifier=verifier,
        more_prompts=more_prompts,
        verifier_timeout_s=verifier_timeout_s,
    )
    for key in ("cancelled_samples", "discarded_samples"):  # streaming's extras: always 0 here, so not reported
        del batch.ledger.extra[key]
    return batch
