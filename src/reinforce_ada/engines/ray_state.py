"""What `RayRolloutPool` (engines/ray_pool.py) keeps track of: the chunks it sent, with the seed rule that makes a
chunk's samples a function of the run and not of the worker, its workers' state, and the faults that mean a worker
is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reinforce_ada.types import Request

STEP_METRICS: dict[str, str] = {
    "worker_restarts": "Workers restarted this step after a fault (up to rollout.max_restarts each).",
    "workers_lost": "Workers that died or hung this step (restarted or not).",
    "rollout_workers": "Workers alive at the end of the step.",
    "rollout_wasted_samples": "Samples decoded for nothing: their prompt was cancelled while their chunk was out.",
    "worker{i}_samples": "Samples worker i returned this step.",
    "worker{i}_busy_s": "Seconds worker i spent sampling this step.",
    "worker_busy_imbalance": "The busiest worker's seconds / the mean over workers (1.0: balanced, or all idle).",
    "policy_version_min": "The oldest weights version (learner updates applied) that drew a chunk this step.",
    "policy_version_max": "The newest weights version that drew a chunk this step.",
}
"""What `RayRolloutPool.step_metrics` returns, each key's definition (declared here: ray_pool.py is at its size
limit); the trainer adds them to every training line when `[rollout] workers > 0` (docs/metrics.md)."""


class NoWorkersLeft(RuntimeError):
    """Every rollout worker died and used up its restarts: the step cannot finish."""


def chunk_seed(seed: int, version: int, chunk: int) -> int:
    """The sampling seed of the `chunk`-th chunk sent after weights `version`: a function of the run, not the worker."""
    return int(np.random.SeedSequence([seed, version + 1, chunk]).generate_state(1, dtype=np.uint64)[0] >> 1)


@dataclass
class Chunk:
    id: int
    requests: list[Request]
    tickets: list[int]
    """One per sample, in request order."""
    prompt_ids: list[str]
    """Prompt of each sample (parallel to `tickets`)."""
    seed: int
    version: int
    worker: int = -1
    ref: Any = None


@dataclass
class WorkerState:
    index: int
    handle: Any = None
    pid: int = -1
    ready_ref: Any = None
    """The pending weight load of a (re)started worker; None once it is ready."""
    restarts: int = 0
    alive: bool = True
    since: float = 0.0
    """When the worker last returned a chunk or became busy: the hang timer's start."""
    samples: int = 0
    busy_s: float = 0.0
    chunks: int = 0
    step: dict[str, float] = field(default_factory=lambda: {"samples": 0, "busy_s": 0.0})


def worker_faults(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors that mean the worker is gone (the deliberate faults this pool tolerates)."""
    ex = ray.exceptions
    return (ex.RayActorError, ex.OutOfMemoryError, ex.WorkerCrashedError)
