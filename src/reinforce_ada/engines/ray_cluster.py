"""Joining a Ray cluster and checking it can hold the rollout workers, before anything waits on it.

1) `connect(rollout)` joins the cluster `rollout.address` names, or starts a local Ray (once per process). A cluster
   that cannot be reached -- `auto` on a node where no `ray start` ran, a `ray://` address nobody listens on -- is a
   `ConfigError` naming `rollout.address` (Ray Client gives up after its own 30 s connection timeout; `auto` fails
   at once), not Ray's traceback.
2) `check_resources(rollout, nodes)`: Ray queues an actor whose request no node can meet, forever. A worker asking
   for more CPUs or GPUs than the largest node has, or workers that together ask for more than the whole cluster
   has, are a `ConfigError` naming the setting and the cluster's numbers. (An autoscaling cluster can grow later;
   these numbers are the ones it has when the run starts.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reinforce_ada.engines.config import RolloutConfig
from reinforce_ada.errors import ConfigError


def connect(rollout: RolloutConfig) -> None:
    """Join the Ray cluster `rollout.address` names, or start a local one (once per process)."""
    import ray

    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if not rollout.address:
        ray.init(num_cpus=rollout.local_cpus or None, **kwargs)
        return
    try:
        ray.init(address=rollout.address, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError) as e:  # Ray's "no running instance" / client timeout
        hint = "run `ray start --head` on this node" if rollout.address == "auto" else "check the host and port"
        raise ConfigError(
            f"rollout.address={rollout.address!r}: no Ray cluster could be reached ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else 'no detail'}); {hint}, or leave rollout.address empty to start "
            "a local Ray"
        ) from None


def check_resources(rollout: RolloutConfig, nodes: Sequence[dict[str, float]]) -> None:
    """Raise `ConfigError` when the alive nodes' resources (`{"CPU": .., "GPU": ..}` each) cannot hold the workers."""
    asks = {"CPU": ("cpus_per_worker", rollout.cpus_per_worker), "GPU": ("gpus_per_worker", rollout.gpus_per_worker)}
    for resource, (name, each) in asks.items():
        if each <= 0:
            continue
        per_node = [n.get(resource, 0.0) for n in nodes]
        largest, total = max(per_node, default=0.0), sum(per_node)
        if each > largest:
            raise ConfigError(
                f"rollout.{name}={each:g}, but the largest node of the Ray cluster has {largest:g} {resource}s "
                f"({len(nodes)} node(s)): no worker could ever start; lower rollout.{name}"
            )
        fit = sum(int(n // each + 1e-9) for n in per_node)
        if fit < rollout.workers:
            raise ConfigError(
                f"rollout.workers={rollout.workers} x rollout.{name}={each:g} asks for {rollout.workers * each:g} "
                f"{resource}s, but the Ray cluster's nodes ({total:g} {resource}s in all) fit only {fit} such "
                f"workers: lower rollout.workers or rollout.{name}"
            )


def alive_nodes(ray: Any) -> list[dict[str, float]]:
    """The resources of each alive node of the connected cluster."""
    return [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive", False)]
