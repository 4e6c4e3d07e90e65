"""Hosts that share nothing but a network link: network namespaces on one machine, each with its own address,
its own run directory and, where asked, a bandwidth limit on its link (the tests' hosts and ``actorq bench comm
--netns``).

What breaks only between real hosts (a restarted role that reads its state from a disk the new host does not have,
a service that listens on the wrong interface, a broadcast that takes seconds on a slow link) cannot be seen on
loopback with one shared disk. :class:`NamespaceHosts` builds, inside network namespaces that it creates itself::

    hub namespace: bridge "br0"  <-veth->  host 0 (10.78.0.1/24, run dir ROOT/h0)
                                 <-veth->  host 1 (10.78.0.2/24, run dir ROOT/h1)
                                 ...

Every veth pair is created inside the namespaces (the machine's own interfaces are never touched), nothing is
routed out, so traffic goes only to the hosts' addresses. ``rate`` puts a ``tbf`` qdisc on both ends of a host's
link (``netem`` is not available on these machines: bandwidth only, no added delay). Processes started with
:meth:`Host.popen` are the helper's to stop; :meth:`NamespaceHosts.close` stops them by handle, then ends whatever
still runs inside its own namespaces (``ip netns pids``: only namespaces it created), then deletes the namespaces,
which removes their links. It runs in a ``finally`` (context manager), so a failing test leaves nothing behind.
Needs root and iproute2; :func:`unavailable_reason` says why not where they are missing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.78.0"
"""The hosts' /24 (inside the namespaces only: nothing outside them can see it)."""
RATE_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")
"""A ``tc`` rate: a number and a unit (``bit`` units are bits per second, ``bps`` units bytes per second)."""


def check_rate(rate: str) -> str:
    """``rate`` as given when it is a ``tc`` rate (``100mbit``, ``1gbit``, ``5mbit``); ValueError saying how else."""
    if not RATE_PATTERN.match(rate):
        raise ValueError(
            f"rate {rate!r}: a number and a tc unit, e.g. 100mbit or 1gbit (bit/kbit/mbit/gbit are bits per second, "
            "bps/kbps/mbps/gbps bytes per second)"
        )
    return rate


def rate_bits_per_s(rate: str) -> float:
    """A :func:`check_rate` rate in bits per second (``"100mbit"`` -> 1e8; tc's k/m/g are powers of 1000)."""
    match = RATE_PATTERN.match(check_rate(rate))
    unit = match.group(2)
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[unit[:-3]]
    return float(rate[: match.start(2)]) * scale * (1 if unit.endswith("bit") else 8)


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")


def unavailable_reason() -> str | None:
    """Why namespace hosts cannot be made here (for ``pytest.skip``), or None when they can."""
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CI runs as root)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` command is not installed"
    return None


def namespace_pids(namespace: str) -> list[int]:
    """The pids of the processes running inside ``namespace`` (empty when it does not exist)."""
    out = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=20
    ).stdout
    return [int(p) for p in out.split()]


@dataclass
class Host:
    """One test host: a network namespace with an address on the hosts' bridge and a run directory of its own."""

    namespace: str
    """The network namespace's name (``ip netns exec NAMESPACE ...``)."""
    address: str
    """Its IPv4 address on the hosts' network."""
    root: Path
    """Its own directory: nothing else is given this path, as if it were this host's disk."""
    interface: str = "eth0"
    """Its end of the link to the hub."""
    procs: list[subprocess.Popen] = field(default_factory=list)
    """Processes started here with :meth:`popen`, in start order."""

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this host's namespace (``ip netns exec`` execs it: the pid is the program's)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` on this host; the helper stops it at close if it still runs."""
        proc = subprocess.Popen(self.command(argv), **kwargs)
        self.procs.append(proc)
        return proc

    def set_link(self, up: bool) -> None:
        """Cut this host off the network (``up=False``) or plug it back in: its interface goes down or up."""
        _ip("-n", self.namespace, "link", "set", self.interface, "up" if up else "down")

    def run(self, argv: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` on this host to completion."""
        return subprocess.run(self.command(argv), timeout=timeout, **kwargs)


class NamespaceHosts:
    """``n`` hosts on one bridged network, each in its own namespace; a context manager that removes them all.

    Args:
        n: How many hosts.
        root: Directory under which each host gets its own run directory (``root/h<i>``).
        rate: Bandwidth limit per host link and direction (tc units, e.g. ``"100mbit"``), or None for none.
        rates: Per-host limits by index, overriding ``rate`` (e.g. ``{2: "10mbit"}``).
        prefix: Namespace name prefix; unique per test process by default (other runs may share the machine).
    """

    def __init__(
        self,
        n: int,
        root: Path,
        rate: str | None = None,
        rates: dict[int, str] | None = None,
        prefix: str | None = None,
    ) -> None:
        if not 1 <= n <= 200:
            raise ValueError(f"n={n}: between 1 and 200 hosts")
        self.prefix = prefix or f"aqh{os.getpid() % 100000}"
        self.hub = f"{self.prefix}hub"
        self.namespaces: list[str] = []
        """Every namespace this object created (the hub first): what close() ends and deletes."""
        self.hosts: list[Host] = []
        limits = {i: rate for i in range(n) if rate} | dict(rates or {})
        try:
            self._add_namespace(self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for i in range(n):
                host = Host(f"{self.prefix}h{i}", f"{SUBNET}.{i + 1}", Path(root) / f"h{i}")
                host.root.mkdir(parents=True, exist_ok=True)
                self._add_namespace(host.namespace)
                # Both ends are made inside the namespaces: the hub's end "p<i>" joins the bridge.
                _ip("-n", self.hub, "link", "add", f"p{i}", "type", "veth", "peer", "name", host.interface)
                _ip("-n", self.hub, "link", "set", host.interface, "netns", host.namespace)
                _ip("-n", self.hub, "link", "set", f"p{i}", "master", "br0")
                _ip("-n", self.hub, "link", "set", f"p{i}", "up")
                _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
                _ip("-n", host.namespace, "link", "set", host.interface, "up")
                self.hosts.append(host)
                if i in limits:
                    self.set_rate(i, limits[i])
        except BaseException:
            self.close()
            raise

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self.namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def set_rate(self, i: int, rate: str | None) -> None:
        """Limit host ``i``'s link to ``rate`` in both directions (a ``tc`` rate, see :func:`check_rate`; tc's own
        error where it refuses one), or lift the limit (``None``); the link stays up, so connections over it survive
        the change."""
        host = self.hosts[i]
        for namespace, interface in ((self.hub, f"p{i}"), (host.namespace, host.interface)):  # to it, from it
            if rate is None:
                # Fails only where no limit was set: there is nothing to lift then.
                subprocess.run(
                    ["tc", "-n", namespace, "qdisc", "del", "dev", interface, "root"],
                    capture_output=True,
                    timeout=20,
                )
            else:
                self._limit(namespace, interface, rate)

    @staticmethod
    def _limit(namespace: str, interface: str, rate: str) -> None:
        # A token bucket: tbf is the rate limiter these kernels have (no netem); 64 kB burst, 50 ms queue.
        _ip("-n", namespace, "link", "set", interface, "txqueuelen", "1000")
        result = subprocess.run(
            ["tc", "-n", namespace, "qdisc", "replace", "dev", interface, "root", "tbf", "rate", rate]
            + ["burst", "64kb", "latency", "50ms"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if result.returncode != 0:
            raise RuntimeError(f"tc tbf rate {rate} on {namespace}/{interface}: {result.stderr.strip()}")

    def __enter__(self) -> NamespaceHosts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __len__(self) -> int:
        return len(self.hosts)

    def close(self, stop_timeout_s: float = 15) -> None:
        """Stop the hosts' processes (SIGTERM, then SIGKILL after ``stop_timeout_s``), delete the namespaces.

        Idempotent. Processes started with :meth:`Host.popen` are stopped by handle; anything else still inside one
        of this object's namespaces (a child a role left behind) is killed by the pid ``ip netns pids`` gives.
        """
        try:
            procs = [p for h in self.hosts for p in reversed(h.procs) if p.poll() is None]
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=stop_timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            for ns in self.namespaces:
                for pid in namespace_pids(ns):
                    with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
                        os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while namespace_pids(ns):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"processes in namespace {ns} still run 10 s after SIGKILL")
                    time.sleep(0.1)
        finally:
            # Deleted even when stopping failed: a namespace left behind outlives the test run.
            for ns in reversed(self.namespaces):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
            self.namespaces = []

    def leftovers(self) -> list[str]:
        """Namespaces named with this object's prefix that still exist (empty after :meth:`close`)."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20).stdout
        return [line.split()[0] for line in listed.splitlines() if line.startswith(self.prefix)]
