"""A 2-node Ray cluster on this host, as the ``ray`` tests use, for trying ``--launcher ray`` by hand.

``python -m tests.ray.local_cluster`` starts a head that advertises ``learner_host`` (1 CPU) and a node at
127.0.0.2 that advertises ``actor_host`` (2 CPUs), prints the address to pass as ``--ray-address``, and stops both
on Ctrl-C or SIGTERM. (``ray start`` twice on one host cannot do this: on loopback Ray needs
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which makes the CLI refuse a second node.)
"""

from __future__ import annotations

import signal
import sys
import threading

from tests.ray.conftest import ray_cluster


def main() -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = ray_cluster.__wrapped__()
    handle = next(cluster)
    sys.stdout.write(
        f"ray cluster at {handle.address}: head {handle.head_id[:8]} (learner_host), actors' node "
        f"{handle.actor_node_id[:8]} (actor_host); Ctrl-C stops it\n"
    )
    sys.stdout.flush()
    stop.wait()
    next(cluster, None)  # the fixture's teardown: disconnect, stop both nodes
    return 0


if __name__ == "__main__":
    sys.exit(main())
