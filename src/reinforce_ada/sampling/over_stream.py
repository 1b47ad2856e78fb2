"""Round mode over any streaming engine: `generate(requests)` = submit, poll until idle, re-index.

Every `StreamingEngine` (the continuous-batching engines, vLLM, the Ray pool, the simulated stream) answers the round
driver's `Engine.generate` with this one function, so the two protocols agree by construction: samples come back in
request order, `index` 0..k-1 within each request (the streaming tickets are dropped), whatever order they finished in.
"""

from __future__ import annotations

from collections.abc import Sequence

from reinforce_ada.sampling.streaming import StreamingEngine
from reinforce_ada.types import Request, Sample


def generate_over_stream(stream: StreamingEngine, requests: Sequence[Request]) -> list[Sample]:
    """`Engine.generate` on `stream`: k samples per request, in request order, `index` 0..k-1 within each request.

    Needs the stream idle (streaming work in flight would be mixed in) and raises if it loses a sample."""
    if not stream.idle():
        raise RuntimeError(f"{type(stream).__name__} has streaming work in flight; generate needs it idle")
    tickets = stream.submit(requests)
    done: dict[int, Sample] = {}
    while not stream.idle():
        done.update((s.index, s) for s in stream.poll())
    missing = [t for t in tickets if t not in done]
    if missing:
        raise RuntimeError(f"{type(stream).__name__} went idle without returning tickets {missing[:5]}")
    out = [done[t] for t in tickets]
    j = 0
    for r in requests:
        for i in range(r.k):
            out[j + i].index = i
        j += r.k
    return out
