"""Ray clusters that cannot hold or be reached are clear errors at once, not a wait forever (issue 21, Ray)."""

from __future__ import annotations

import pytest

from reinforce_ada.engines.config import RolloutConfig
from reinforce_ada.engines.ray_cluster import check_resources, connect
from reinforce_ada.errors import ConfigError

TWO_NODES = [{"CPU": 4.0, "GPU": 1.0}, {"CPU": 2.0}]


def test_a_worker_larger_than_any_node_is_refused():
    with pytest.raises(ConfigError, match=r"rollout.cpus_per_worker=8.*largest node.*4 CPUs"):
        check_resources(RolloutConfig(workers=1, cpus_per_worker=8), TWO_NODES)
    with pytest.raises(ConfigError, match=r"rollout.gpus_per_worker=2.*largest node.*1 GPUs"):
        check_resources(RolloutConfig(workers=1, gpus_per_worker=2), TWO_NODES)


def test_workers_that_do_not_fit_together_are_refused():
    check_resources(RolloutConfig(workers=3, cpus_per_worker=2), TWO_NODES)  # 2 on the first node, 1 on the second
    with pytest.raises(ConfigError, match=r"rollout.workers=4 x rollout.cpus_per_worker=2 .*fit only 3"):
        check_resources(RolloutConfig(workers=4, cpus_per_worker=2), TWO_NODES)
    # 3 CPUs a worker: 5 CPUs are free in all, but no node holds two workers
    with pytest.raises(ConfigError, match="fit only 1"):
        check_resources(RolloutConfig(workers=2, cpus_per_worker=3), TWO_NODES)
    check_resources(RolloutConfig(workers=12, cpus_per_worker=0.5), TWO_NODES)
    check_resources(RolloutConfig(workers=2, cpus_per_worker=0), [])  # asks for nothing: nothing to check


@pytest.mark.parametrize(
    ("address", "error", "hint"),
    [
        ("auto", ConnectionError("Could not find any running Ray instance."), "ray start --head"),
        ("ray://127.0.0.1:1", ConnectionError("ray client connection timeout"), "host and port"),
    ],
)
def test_an_unreachable_cluster_names_rollout_address(monkeypatch, address, error, hint):
    ray = pytest.importorskip("ray")
    calls = []

    def refuse(**kwargs):
        calls.append(kwargs)
        raise error

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(ConfigError, match=rf"rollout.address='{address}': no Ray cluster could be reached.*{hint}"):
        connect(RolloutConfig(workers=1, address=address))
    assert calls[0]["address"] == address
