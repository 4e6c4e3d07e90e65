"""A Ray cluster on namespace hosts that share nothing (``tests/hosts.py``): each node its own network namespace,
its own address on the hosts' bridge, its own run directory and its own Ray temp directory.

Host 0 (10.78.0.1) runs the head (``learner_host``) and the driver (``actorq train --launcher ray``); host 1
(10.78.0.2) the actors' node (``actor_host``); host 2 (10.78.0.3) stays empty until :meth:`NamespaceCluster.lose_actor_host`
kills every process of the actors' host (the host is gone, as a machine that loses power) and starts a new actors'
node on the spare host, where Ray restarts the actors.

Nothing is shared but the network. The launcher hands every role the same run-directory path and Ray gives every node
the head's temp directory, so each node runs in a mount namespace of its own in which its host's directories are
bind-mounted over those paths: a role on host 1 that writes ``RUN/actor_0/status.json`` writes it on host 1's "disk"
(``hosts[1].root / "run"``), and a role Ray restarts on host 2 does not find it. Host 0 (head and driver) uses the
paths as they are. The run's weights key is the one thing an operator copies to every host (:meth:`distribute_key`).

Each node is ``ray start --block`` started with :meth:`Host.popen`: the handle is the node, and
:meth:`NamespaceCluster.close` stops it by that handle; ``NamespaceHosts.close`` then kills whatever still runs
inside the namespaces it made (raylets, workers) by the pids ``ip netns pids`` gives. Never ``ray stop``: it kills
Ray processes by name on the whole machine. Every port is the namespace's own, so the defaults never collide with
another Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from actorq.weights_key import ensure_run_key
from tests.hosts import NamespaceHosts, namespace_pids
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
HEAD_PORT = 6379
"""The GCS port on the head (host 0's namespace has nothing else listening)."""
OBJECT_STORE_BYTES = 80 * 1024 * 1024
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}
"""As the loopback cluster (conftest.HEALTH): a lost node is noticed in ~2 s, not Ray's default ~30 s."""
ACTOR_NODE_CPUS = 2
"""CPUs an actors' node advertises: the tiny runs' two actors ask one each."""
START_TIMEOUT_S = 120
"""How long ``ray start`` may take to report its node up (a loaded 2-core machine)."""


def node_env() -> dict[str, str]:
    """The environment of every process on the hosts: this checkout's actorq, no proxies (gRPC honours them), and
    none of the loopback cluster's ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (which makes ``ray start`` refuse to
    join a node to a head)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    env.pop("RAY_ADDRESS", None)
    env.update(
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        OMP_NUM_THREADS="1",
        RAY_USAGE_STATS_ENABLED="0",
        no_proxy="*",
    )
    return env


class NamespaceCluster:
    """Three namespace hosts with a Ray head on host 0 and an actors' node on host 1; a context manager.

    Args:
        base: An empty directory with a short path (Ray's socket paths under it must stay below 107 bytes).
    """

    def __init__(self, base: Path):
        self.base = Path(base)
        self.hosts = NamespaceHosts(3, self.base, prefix=f"aqr{os.getpid() % 100000}")
        self.run_root = self.hosts[0].root / "run"
        """The run-directory path every host sees; each host's own directory is mounted there."""
        self.temp_dir = self.hosts[0].root / "ray"
        """The Ray temp-directory path every node uses (the head's; Ray imposes it on the other nodes)."""
        self.nodes: dict[int, subprocess.Popen] = {}
        """Host index -> its ``ray start --block`` process."""
        self.actor_host = 1
        """Which host runs the actors' node now."""
        self.seen_pids: set[int] = set()
        """Every process seen inside the hosts' namespaces (for the check that none outlives the cluster)."""
        try:
            for host in self.hosts.hosts:
                (host.root / "run").mkdir()
                (host.root / "ray").mkdir()
            self._start_node(0, ["--head", "--port", str(HEAD_PORT), "--num-cpus", "1"], {"learner_host": 1})
            self._start_node(
                1, ["--address", self.address, "--num-cpus", str(ACTOR_NODE_CPUS)], {"actor_host": 1}
            )
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        """The head's GCS address, as ``--ray-address`` takes it."""
        return f"{self.hosts[0].address}:{HEAD_PORT}"

    def host_dir(self, index: int, run_dir: Path) -> Path:
        """Where ``run_dir`` (a path under :attr:`run_root`) really lies on host ``index``'s disk."""
        return self.hosts[index].root / "run" / Path(run_dir).relative_to(self.run_root)

    def _start_node(self, index: int, args: list[str], resources: dict[str, float]) -> None:
        host = self.hosts[index]
        ray_cli = str(Path(sys.executable).parent / "ray")
        argv = [ray_cli, "start", "--block", "--node-ip-address", host.address, *args]
        argv += ["--resources", json.dumps(resources), "--object-store-memory", str(OBJECT_STORE_BYTES)]
        argv += ["--disable-usage-stats"]
        if index == 0:  # head-only options (ray start refuses them on other nodes)
            argv += [
                "--include-dashboard=false",
                "--temp-dir",
                str(self.temp_dir),
                "--system-config",
                json.dumps(HEALTH),
            ]
        else:
            # This host's own disk at the paths the launcher and Ray hand every node.
            mounts = " && ".join(
                f"mount --bind {host.root / name} {self.hosts[0].root / name}" for name in ("run", "ray")
            )
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f'{mounts} && exec "$@"',
                "sh",
                *argv,
            ]
        log = host.root / f"ray-start-{len(host.procs)}.log"
        with log.open("wb") as out:
            node = host.popen(argv, stdout=out, stderr=subprocess.STDOUT, env=node_env(), cwd=host.root)
        self.nodes[index] = node

        def up() -> bool:
            if node.poll() is not None:
                raise AssertionError(
                    f"ray start on host {index} exited {node.returncode}:\n{log.read_text()[-3000:]}"
                )
            return "Ray runtime started" in log.read_text(errors="replace")

        wait_until(up, START_TIMEOUT_S, f"the Ray node on host {index} ({host.address})")

    def distribute_key(self, name: str) -> Path:
        """Make a weights key for run ``name`` on host 0 and copy it to the same path on every other host, as an
        operator would; returns its path (for ``--weights-key-file``: a run directory must start empty)."""
        key = ensure_run_key(self.run_root / "keys" / name)
        for index in range(1, len(self.hosts)):
            copy = self.host_dir(index, key)
            copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copy2(key, copy)
        return key

    def driver(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` (the ``actorq train`` driver) on host 0, beside the head."""
        return self.hosts[0].popen(argv, cwd=ROOT, env=node_env(), **kwargs)

    def lose_actor_host(self) -> tuple[int, int]:
        """Kill every process on the actors' host (its node, its workers: the host is gone) and start an actors'
        node on the spare host; returns (old host index, new host index)."""
        old = self.actor_host
        new = 2 if old == 1 else 1
        self._note_pids()
        for pid in namespace_pids(self.hosts[old].namespace):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: not namespace_pids(self.hosts[old].namespace), 20, f"host {old}'s processes to end"
        )
        self.nodes[old].wait(timeout=10)
        self._start_node(
            new, ["--address", self.address, "--num-cpus", str(ACTOR_NODE_CPUS)], {"actor_host": 1}
        )
        self.actor_host = new
        return old, new

    def _note_pids(self) -> None:
        for ns in self.hosts.namespaces:
            self.seen_pids.update(namespace_pids(ns))

    def leftovers(self) -> list[str]:
        """What of the cluster still exists: namespaces, processes seen in them, processes naming its directories."""
        found = [f"namespace {ns}" for ns in self.hosts.leftovers()]
        for proc in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if proc.info["pid"] in self.seen_pids or str(self.base) in " ".join(
                    proc.info["cmdline"] or ()
                ):
                    found.append(f"process {proc.info['pid']}: {' '.join(proc.info['cmdline'] or ())[:200]}")
            except psutil.Error:
                continue
        return found

    def close(self) -> None:
        """Stop the nodes by handle (actors' hosts first, the head last), then remove the hosts and all they ran."""
        try:
            self._note_pids()
            for index in sorted(self.nodes, reverse=True):
                node = self.nodes[index]
                if node.poll() is None:
                    node.terminate()
                    try:
                        node.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        node.kill()
                        node.wait(timeout=10)
            self._note_pids()
        finally:
            self.hosts.close()

    def __enter__(self) -> NamespaceCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def short_base() -> Path:
    """A fresh directory under /tmp with a short path (Ray's unix sockets live under it)."""
    return Path(tempfile.mkdtemp(prefix="aqns", dir="/tmp"))
