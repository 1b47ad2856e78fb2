"""A simulated streaming engine: decode slots, a queue and a clock over `SimulatedPolicy`, and round mode on it.

`SimulatedStream` is a `sampling.streaming.StreamingEngine` whose samples take simulated time (`Latency`);
`RoundEngine` runs the same simulator with a barrier per `generate` call (continuous batching inside a round, as
vLLM's synchronous generate), so both drivers are timed on the same latency model (`simulation.makespan`).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.over_stream import generate_over_stream
from reinforce_ada.types import Request, Sample


@dataclass(frozen=True)
class Latency:
    """Simulated decode time of one sample: tokens x `token_time`, tokens lognormal with mean `mean_tokens`."""

    mean_tokens: float = 200.0
    sigma: float | None = 0.6
    """Lognormal shape of the completion length; None keeps the policy's own (Poisson) token counts."""
    token_time: float = 0.005
    """Simulated seconds per token (1 s for a mean-length sample)."""

    def tokens(self, rng: np.random.Generator, k: int) -> np.ndarray:
        mu = np.log(self.mean_tokens) - 0.5 * self.sigma**2  # type: ignore[operator]
        return np.maximum(1, np.rint(rng.lognormal(mu, self.sigma, k))).astype(int)


class SimulatedStream:
    """A `StreamingEngine` over a `SimulatedPolicy`: `slots` decode slots, a queue, a simulated clock.

    Outcomes are drawn at `submit` with the policy's own `generate` (so a one-batch step draws exactly what round mode
    draws), durations from this engine's generator. A slot freed by a finished or cancelled sample takes the next
    queued one at once, in submission order (FIFO; an earliest-batch-first priority queue measured no better on
    `hard_pool`, so it is not offered). `poll` advances the clock to the next completion. `clock` is the simulated
    wall time.
    """

    def __init__(self, policy: Any, slots: int, latency: Latency | None = None, seed: int = 0):
        if slots < 1:
            raise ValueError(f"slots={slots} must be >= 1")
        self.policy, self.slots, self.latency = policy, slots, latency or Latency()
        self.rng = np.random.default_rng(seed)
        self.queue: deque[tuple[int, Sample, float]] = deque()
        self.running: list[tuple[float, int, float, Sample]] = []  # heap of (finish, ticket, start, sample)
        self.clock = 0.0
        self.busy = 0.0
        """Slot-seconds spent on samples that finished."""
        self.wasted = 0.0
        """Slot-seconds spent on samples cancelled mid-decode."""
        self.next_ticket = 0

    def submit(self, requests: Sequence[Request]) -> list[int]:
        samples = self.policy.generate(requests)
        if self.latency.sigma is not None:
            for s, n in zip(samples, self.latency.tokens(self.rng, len(samples)), strict=True):
                s.num_tokens = int(n)
        tickets = []
        for s in samples:
            s.index = self.next_ticket
            tickets.append(self.next_ticket)
            self.queue.append((self.next_ticket, s, s.num_tokens * self.latency.token_time))
            self.next_ticket += 1
        self._fill()
        return tickets

    def _fill(self) -> None:
        while self.queue and len(self.running) < self.slots:
            ticket, s, duration = self.queue.popleft()
            heapq.heappush(self.running, (self.clock + duration, ticket, self.clock, s))

    def poll(self) -> list[Sample]:
        if not self.running:
            return []
        t = self.running[0][0]
        out = []
        while self.running and self.running[0][0] == t:
            _, _, start, s = heapq.heappop(self.running)
            self.busy += t - start
            out.append(s)
        self.clock = t
        self._fill()
        return out

    def cancel(self, prompt_id: str) -> int:
        n = len(self.queue) + len(self.running)
        self.queue = deque(q for q in self.queue if q[1].prompt_id != prompt_id)
        keep = []
        for r in self.running:
            if r[3].prompt_id == prompt_id:
                self.wasted += self.clock - r[2]
            else:
                keep.append(r)
        heapq.heapify(keep)
        self.running = keep
        self._fill()
        return n - len(self.queue) - len(self.running)

    def idle(self) -> bool:
        return not self.queue and not self.running


class RoundEngine:
    """Round mode on the same simulator: `generate` submits a round and waits for all of it (the barrier)."""

    def __init__(self, stream: SimulatedStream):
        self.stream = stream

    @property
    def clock(self) -> float:
        return self.stream.clock

    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        return generate_over_stream(self.stream, requests)
