"""A 2-node Ray cluster on this host for the ``ray`` tier: the head advertises ``learner_host``, the worker node
``actor_host``, as docs/scale-out.md tells a real cluster to.

Started once per test module (a few seconds, ~0.9 GiB; gone after the module, so later tests that check they leave
no child process behind do not see it); the tests join it with ``actorq train --ray-address``. Node
failures are noticed within ~2 s (health checks every 500 ms, 3 misses) instead of Ray's default ~30 s, so a test
that removes a node sees its actors restarted elsewhere quickly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

# Ray's loopback clusters hang their drivers without this (see shared notes); the train subprocesses inherit it.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

NODE_ARGS = {"object_store_memory": 80 * 1024 * 1024}
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}
ACTOR_NODE_CPUS = 2
"""CPUs the actors' node advertises: the tiny runs' two actors ask one each."""
ACTOR_NODE_IP = "127.0.0.2"
"""The actors' node's address. Every node would otherwise be 127.0.0.1, and a driver joining later (the launcher)
connects to whichever raylet has its address: it must be the head's, or removing the actors' node breaks it."""


@dataclass
class LoopbackCluster:
    """The fixture's cluster: ``address`` to join, the nodes, and how to swap the actors' node."""

    cluster: Any
    actor_node: Any
    head_id: str
    retired: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.cluster.address

    @property
    def actor_node_id(self) -> str:
        return self.actor_node.node_id

    def replace_actor_node(self) -> tuple[str, str]:
        """Remove the actors' node (its raylet and every worker on it) and add a fresh one; (old id, new id)."""
        old = self.actor_node.node_id
        self.cluster.remove_node(self.actor_node)
        self.retired.append(old)
        self.actor_node = _add_actor_node(self.cluster)
        return old, self.actor_node.node_id


def _add_actor_node(cluster: Any) -> Any:
    from ray._private.services import write_node_ip_address

    node = cluster.add_node(
        num_cpus=ACTOR_NODE_CPUS, resources={"actor_host": 1}, node_ip_address=ACTOR_NODE_IP, **NODE_ARGS
    )
    # Ray caches "this host's address" in the session directory, and the node just added overwrote it with its
    # own: a driver starting now would join the actors' node. Point the cache back at the head.
    head = cluster.head_node
    write_node_ip_address(head.get_session_dir_path(), head.node_ip_address)
    return node


def role_workers() -> list[psutil.Process]:
    """Live Ray worker processes of this session's clusters that run (or ran) an ActorQ role."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and "RoleActor" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"learner_host": 1},
            "include_dashboard": False,
            "_system_config": HEALTH,
            **NODE_ARGS,
        },
    )
    # The test process joins before adding the second node: Cluster.remove_node needs a connected driver.
    ray.init(address=cluster.address, log_to_driver=False)
    actor_node = _add_actor_node(cluster)
    handle = LoopbackCluster(cluster, actor_node, cluster.head_node.node_id)
    try:
        yield handle
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def ns_cluster():
    """A Ray cluster on namespace hosts that share nothing but a network (``tests/ray/ns_cluster.py``): head on
    host 0, actors' node on host 1, host 2 spare. Afterwards nothing it made remains (checked)."""
    import shutil

    from tests.hosts import unavailable_reason
    from tests.ray.ns_cluster import NamespaceCluster, short_base

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    base = short_base()
    try:
        with NamespaceCluster(base) as cluster:
            yield cluster
        leftovers = cluster.leftovers()
        assert not leftovers, f"the namespace cluster left these behind: {leftovers}"
    finally:
        shutil.rmtree(base, ignore_errors=True)
