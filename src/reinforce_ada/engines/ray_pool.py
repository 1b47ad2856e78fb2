"""Ray rollout workers behind the drivers' two interfaces: `RayRolloutPool` is an `Engine` (`generate`) and a
`StreamingEngine` (submit / poll / cancel / idle), so the round and streaming drivers and the trainer use it unchanged.

1) Chunks. `submit` splits the requests' samples, in order, into chunks (a prompt's k samples may straddle two
   chunks, so they come from any worker) and sends each chunk to a worker at once: round-robin by chunk number over
   the live workers (skipping a restarted one until it has loaded the weights). Nothing waits in the driver; each
   actor runs its chunks in order.
2) Seeds come from the chunk, not the worker: chunk c after the v-th weight publication is sampled with a seed drawn
   from (run seed, v, c) (`chunk_seed`). A chunk gives the same samples on any worker, and again when a fault
   re-queues it, so two runs with the same seed and worker count give identical metrics, faults or not.
   The same numbers with another worker count would need per-sample seeds inside the batched decode loop; they
   differ (the law does not: tests compare ledgers).
3) Arrivals. `poll` returns exactly one chunk, the oldest with samples the driver still wants, waiting for it while
   later chunks run. The driver therefore sees the same sequence of arrivals whatever the timing (determinism), at
   chunk granularity: a streaming step keeps every worker busy while it checks the chunk in hand. `cancel` drops a
   prompt's samples in chunks not yet returned (counted as cancelled; their decode work is wasted, as in-process
   streaming wastes a cancelled row's tokens).
4) Weights. `sync_weights(model)` (the trainer calls it after every update) puts the learner's trainable parameters
   (the whole model, or only the LoRA adapter when LoRA is on) in the object store once (`ray.put`); every worker
   loads them before it samples again (actor calls run in order). Each sample records the weights version that drew
   it (`Sample.policy_version` = learner updates applied), and a worker asked to sample with other weights fails.
   A change of the model's weights not announced by `sync_weights` (a checkpoint loaded on resume) is noticed through
   the parameters' version counters and published before the next chunk.
5) Faults. A worker whose call fails because it died (killed, out of memory: `RayActorError`, `OutOfMemoryError`)
   or that returns nothing for `timeout_s` while it has work (hung) is killed, its chunks are re-sent to the other
   workers (same seeds), and it is restarted with the current weights, up to `max_restarts` times; `worker_restarts`
   counts them. With no worker left the pool raises `NoWorkersLeft` (the trainer saves a checkpoint first).
6) Metrics (`step_metrics`, per step): samples and busy seconds per worker, so imbalance is visible, restarts, the
   weights versions that sampled, and the samples decoded for nothing after a cancel.
Joining the cluster and checking it can hold the workers is `engines.ray_cluster`'s; the chunk and worker records,
the seed rule and the fault types are `engines.ray_state`'s.
Owns: `RayRolloutPool`, `NoWorkersLeft`, `chunk_seed`. May import: `types`, `errors`, `models`, `engines`; imports
`ray` lazily (the `[ray]` extra), so the package imports without it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from reinforce_ada.engines.config import GenerationConfig, RolloutConfig, engine_spec
from reinforce_ada.engines.protocol import Capabilities
from reinforce_ada.engines.ray_cluster import alive_nodes, check_resources, connect
from reinforce_ada.engines.ray_state import Chunk, NoWorkersLeft, WorkerState, chunk_seed, worker_faults
from reinforce_ada.engines.ray_worker import RolloutWorker
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.over_stream import generate_over_stream
from reinforce_ada.types import Request, Sample

STARTUP_TIMEOUT_S = 300.0
"""Seconds a (re)started worker may take to load the model and the first weights before it counts as hung."""


class RayRolloutPool:
    """`workers` Ray actors, each a `RolloutWorker`; see the module docstring. A `RolloutEngine` (not registered by
    name: the trainer builds it when `rollout.workers > 0`, and each worker builds the engine `rollout.engine`)."""

    capabilities: ClassVar[Capabilities] = Capabilities(streaming=True, own_weights=True, step_metrics=True)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_path: str,
        model_cfg: Any,
        rollout: RolloutConfig,
        generation: GenerationConfig,
        seed: int = 0,
    ) -> None:
        import ray

        if rollout.workers < 1:
            raise ConfigError(f"rollout.workers={rollout.workers}: a Ray pool needs at least one worker")
        self.ray, self.cfg, self.model, self.seed = ray, rollout, model, seed
        self.timeout_s = rollout.timeout_s
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        spec = engine_spec(generation, seed=seed, streaming=False, bf16=getattr(model_cfg, "bf16", False))
        self._actor_args = (str(model_path), model_cfg, rollout.engine, spec, rollout.threads)
        connect(rollout)
        check_resources(rollout, alive_nodes(ray))  # an actor no node can hold would be queued forever
        env = {"OMP_NUM_THREADS": str(rollout.threads), "MKL_NUM_THREADS": str(rollout.threads)}
        self._actor_cls = ray.remote(RolloutWorker).options(
            num_cpus=rollout.cpus_per_worker,
            num_gpus=rollout.gpus_per_worker,
            runtime_env={"env_vars": env},
            max_concurrency=1,
        )
        self.version = 0
        """Learner updates applied to the weights the workers sample with."""
        self.next_chunk = 0
        """Chunks sent since the last publication (the seed's counter)."""
        self.next_ticket = 0
        self.pending: dict[int, Chunk] = {}
        """Chunks sent and not yet handed to the driver, by id (insertion = submission order)."""
        self.results: dict[int, list[Sample]] = {}
        self.dropped: set[int] = set()
        """Tickets cancelled while their chunk was out."""
        self.restarts_total = 0
        self._step = dict(worker_restarts=0, workers_lost=0, wasted_samples=0)
        self._versions: set[int] = set()
        self._weights_ref: Any = None
        self._published: int | None = None
        self.workers = [WorkerState(i) for i in range(rollout.workers)]
        for w in self.workers:
            self._start(w)
        self.publish()

    # -- the StreamingEngine protocol ----------------------------------------------------------------------------
    def submit(self, requests: Sequence[Request]) -> list[int]:
        self._publish_if_changed()
        rows = [(r, self.next_ticket + i) for i, r in enumerate(r for r in requests for _ in range(r.k))]
        tickets = [t for _, t in rows]
        self.next_ticket += len(rows)
        # split by the configured worker count, not the live one: a lost worker must not change the chunks (seeds)
        size = -(-len(rows) // self.cfg.workers) if rows else 1
        if self.cfg.chunk_samples:
            size = min(size, self.cfg.chunk_samples)
        for lo in range(0, len(rows), size):
            part = rows[lo : lo + size]
            reqs: list[Request] = []
            for r, _ in part:  # consecutive samples of a prompt make one request of k > 1
                if reqs and reqs[-1].prompt is r.prompt:
                    reqs[-1] = Request(r.prompt, reqs[-1].k + 1, r.max_tokens)
                else:
                    reqs.append(Request(r.prompt, 1, r.max_tokens))
            seed = chunk_seed(self.seed, self.version, self.next_chunk)
            c = Chunk(self.next_chunk, reqs, [t for _, t in part], [r.prompt.id for r, _ in part], seed, self.version)
            self.next_chunk += 1
            self._send(c)
        return tickets

    def poll(self) -> list[Sample]:
        while True:
            head = next((c for c in self.pending.values() if not self._all_dropped(c)), None)
            if head is None:
                return []
            samples = self._wait_for(head)
            del self.pending[head.id]
            out = []
            for s, ticket in zip(samples, head.tickets, strict=True):
                if ticket in self.dropped:
                    self.dropped.discard(ticket)
                    self._step["wasted_samples"] += 1
                    continue
                s.index = ticket
                out.append(s)
            if out:
                return out

    def cancel(self, prompt_id: str) -> int:
        n = 0
        for c in self.pending.values():
            for pid, ticket in zip(c.prompt_ids, c.tickets, strict=True):
                if pid == prompt_id and ticket not in self.dropped:
                    self.dropped.add(ticket)
                    n += 1
        return n

    def idle(self) -> bool:
        return all(self._all_dropped(c) for c in self.pending.values())

    # -- round mode ----------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        """`Engine.generate`: k samples per request, in request order, `index` 0..k-1 within each request."""
        return generate_over_stream(self, requests)

    # -- weights, state, metrics ---------------------------------------------------------------------------------
    def sync_weights(self, model: Any) -> None:
        """The learner applied an update: publish its weights as the next version (workers load before sampling)."""
        self.model = model
        self.version += 1
        try:
            self.drain()
            self.publish()
        except NoWorkersLeft:  # this step's samples are all in: the next step's first submit reports it
            self.pending.clear()
            self.dropped.clear()
            self.results.clear()

    def publish(self) -> None:
        """Put the model's trainable parameters in the object store once and have every live worker load them."""
        import torch

        with torch.no_grad():
            params = {n: p.detach().to("cpu", copy=True) for n, p in self.model.named_parameters() if p.requires_grad}
        self._weights_ref = self.ray.put(params)
        self._published = _weights_signature(self.model)
        self.next_chunk = 0
        for w in self._live():
            # queued behind the worker's earlier chunks: a chunk sent after this call samples with these weights
            w.ready_ref = w.handle.load_weights.remote(self._weights_ref, self.version)
        self.wait_ready()  # a barrier: every worker holds the new weights before the next step's first chunk

    def wait_ready(self) -> None:
        """Block until every live worker has loaded the current weights (restarting those that die meanwhile)."""
        while any(w.ready_ref is not None for w in self._live()):
            self._wait_any(None)

    def drain(self) -> None:
        """Wait for every chunk still out (cancelled ones included) and forget them: the step is over."""
        while self.pending:
            c = next(iter(self.pending.values()))
            self._wait_for(c)
            del self.pending[c.id]
        self.dropped.clear()
        self.results.clear()

    def reseed(self, seed: int) -> None:
        """Chunk seeds derive from (seed, weights version, chunk number): restart the chunk count under `seed`."""
        self.seed, self.next_chunk = seed, 0

    def with_sampling(self, **overrides: Any) -> RayRolloutPool:
        raise ConfigError(
            "a Ray rollout pool's sampling settings are fixed when its workers start; build another pool (or use "
            f"engines.build_engine in this process) for other settings ({sorted(overrides)})"
        )

    def state_dict(self) -> dict[str, Any]:
        return {"version": self.version, "next_chunk": self.next_chunk}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.drain()
        self.version = int(state["version"])
        self._published = None  # the checkpoint's weights reach the workers before the next chunk
        self._publish_if_changed()
        self.next_chunk = int(state["next_chunk"])

    def step_metrics(self) -> dict[str, Any]:
        """This step's rollout metrics (then reset): per-worker samples and busy seconds, restarts, versions."""
        m: dict[str, Any] = {
            "worker_restarts": self._step["worker_restarts"],
            "workers_lost": self._step["workers_lost"],
        }
        m["rollout_workers"] = sum(w.alive for w in self.workers)
        m["rollout_wasted_samples"] = self._step["wasted_samples"]
        busy = [w.step["busy_s"] for w in self.workers]
        for w in self.workers:
            m[f"worker{w.index}_samples"] = int(w.step["samples"])
            m[f"worker{w.index}_busy_s"] = w.step["busy_s"]
            w.step = {"samples": 0, "busy_s": 0.0}
        m["worker_busy_imbalance"] = max(busy) / (sum(busy) / len(busy)) if sum(busy) > 0 else 1.0
        if self._versions:
            m["policy_version_min"], m["policy_version_max"] = min(self._versions), max(self._versions)
        self._versions = set()
        self._step = dict(worker_restarts=0, workers_lost=0, wasted_samples=0)
        return m

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    def close(self) -> None:
        for w in self.workers:
            if w.handle is not None:
                self.ray.kill(w.handle, no_restart=True)
            w.handle, w.alive = None, False

    # -- internals -----------------------------------------------------------------------------------------------
    def _live(self) -> list[WorkerState]:
        live = [w for w in self.workers if w.alive]
        if not live:
            raise NoWorkersLeft(
                f"all {len(self.workers)} rollout workers died and used up their restarts "
                f"(rollout.max_restarts={self.cfg.max_restarts}); the Ray cluster has no worker left"
            )
        return live

    def _all_dropped(self, c: Chunk) -> bool:
        return all(t in self.dropped for t in c.tickets)

    def _start(self, w: WorkerState) -> None:
        w.handle = self._actor_cls.remote(*self._actor_args)
        w.ready_ref = w.handle.load_weights.remote(self._weights_ref, self.version) if self._weights_ref else None
        w.since = time.monotonic()

    def _send(self, c: Chunk) -> None:
        """Send `c` round-robin (by chunk number) to a live worker, skipping restarted ones still loading if any."""
        live = self._live()
        ready = [w for w in live if w.ready_ref is None] or live
        w = ready[c.id % len(ready)]
        if not any(p.worker == w.index and p.id not in self.results for p in self.pending.values()):
            w.since = time.monotonic()  # idle until now: the hang timer starts with this chunk
        c.worker, c.ref = w.index, w.handle.generate.remote(c.requests, c.seed, c.version)
        self.pending[c.id] = c

    def _publish_if_changed(self) -> None:
        if self._published != _weights_signature(self.model):
            self.drain()
            self.publish()

    def _wait_for(self, c: Chunk) -> list[Sample]:
        while c.id not in self.results:
            self._wait_any(c)
        return self.results.pop(c.id)

    def _wait_any(self, target: Chunk | None) -> None:
        """Wait (at most until the next hang deadline) for any outstanding call; record results, handle faults."""
        ray = self.ray
        calls: dict[Any, tuple[str, Any]] = {}
        for c in self.pending.values():
            if c.id not in self.results:
                calls[c.ref] = ("chunk", c)
        for w in self._live():
            if w.ready_ref is not None:
                calls[w.ready_ref] = ("ready", w)
        if not calls:
            return
        now = time.monotonic()
        busy = {c.worker for kind, c in calls.values() if kind == "chunk"}
        deadlines = {w.index: w.since + self._limit(w) for w in self._live() if w.index in busy or w.ready_ref}
        wait_s = min(min(deadlines.values(), default=now + 1.0) - now, 1.0)
        ready, _ = ray.wait(list(calls), num_returns=1, timeout=max(0.01, wait_s))
        for ref in ready:
            kind, obj = calls[ref]
            if kind == "ready":
                self._on_ready(obj, ref)
            else:
                self._on_chunk(obj, ref)
        now = time.monotonic()
        for w in self._live():
            if w.index in deadlines and now > deadlines[w.index] and (w.ready_ref is not None or w.index in busy):
                what = (  # a worker never scheduled (cluster resources taken by others) also ends here
                    "started and loaded no weights (is the cluster short of rollout.cpus_per_worker / gpus_per_worker?)"
                    if w.ready_ref is not None
                    else "returned nothing"
                )
                self._lost(w, f"{what} for {self._limit(w):g} s (hung)")

    def _limit(self, w: WorkerState) -> float:
        """Seconds without news before `w` counts as hung: starting (model load, engine build) may take longer."""
        return max(self.timeout_s, STARTUP_TIMEOUT_S) if w.ready_ref is not None else self.timeout_s

    def _on_ready(self, w: WorkerState, ref: Any) -> None:
        try:
            w.pid = self.ray.get(ref)
        except worker_faults(self.ray) as e:
            if w.ready_ref is ref:
                self._lost(w, f"{type(e).__name__} while loading weights")
            return
        if w.ready_ref is ref:
            w.ready_ref, w.since = None, time.monotonic()

    def _on_chunk(self, c: Chunk, ref: Any) -> None:
        if c.ref is not ref or c.id not in self.pending:  # re-sent after its worker died; an old answer
            return
        w = self.workers[c.worker]
        try:
            samples, busy_s = self.ray.get(ref)
        except worker_faults(self.ray) as e:
            self._lost(w, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return
        except self.ray.exceptions.RayTaskError as e:  # out of accelerator memory inside the engine: a fault too
            if "OutOfMemoryError" not in type(getattr(e, "cause", None)).__name__:
                raise
            self._lost(w, "out of memory")
            return
        if len(samples) != len(c.tickets):
            raise RuntimeError(f"worker {w.index} returned {len(samples)} samples for {len(c.tickets)} requested")
        for s in samples:
            if s.policy_version != c.version:
                raise RuntimeError(f"worker {w.index} sampled with weights {s.policy_version}, not {c.version}")
        self._versions.add(c.version)
        self.results[c.id] = samples
        w.since = time.monotonic()
        w.samples += len(samples)
        w.busy_s += busy_s
        w.chunks += 1
        w.step["samples"] += len(samples)
        w.step["busy_s"] += busy_s

    def _lost(self, w: WorkerState, why: str) -> None:
        """Kill `w`, re-send its outstanding chunks to the live workers, restart it if it has restarts left."""
        import warnings

        self.ray.kill(w.handle, no_restart=True)
        w.alive, w.ready_ref = False, None
        self._step["workers_lost"] += 1
        if w.restarts < self.cfg.max_restarts:
            self._step["worker_restarts"] += 1
            self.restarts_total += 1
            w.restarts += 1
            w.alive = True
            self._start(w)
        warnings.warn(
            f"rollout worker {w.index} (pid {w.pid}) lost: {why}; "
            + (f"restarted ({w.restarts}/{self.cfg.max_restarts})" if w.alive else "no restarts left"),
            stacklevel=2,
        )
        for c in [c for c in self.pending.values() if c.worker == w.index and c.id not in self.results]:
            self._send(c)


def _weights_signature(model: Any) -> int:
    """Changes whenever any parameter is written in place (optimizer step, `load_state_dict`, `copy_`)."""
    return sum(p._version for p in model.parameters())


__all__ = ["NoWorkersLeft", "RayRolloutPool", "chunk_seed"]
