"""The namespace-host helper (``tests/hosts.py``) itself: hosts reach each other only by their addresses, a rate
limit limits, and nothing it made survives it, not even when the test fails or a process leaves a child behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.hosts import NamespaceHosts, namespace_pids, unavailable_reason
from tests.waiting import wait_until

pytestmark = pytest.mark.faults

PORT = 5000
PAYLOAD = 1_500_000  # bytes: 1.2 s at 10 Mbit/s, milliseconds on an unlimited veth
LIMIT_MBIT = 10

# Counts the bytes it receives on one connection and answers with the count; run inside a host's namespace.
SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(4); print("listening", flush=True)
while True:
    c, _ = s.accept(); n = 0
    while (b := c.recv(1 << 16)):
        n += len(b)
    c.sendall(str(n).encode()); c.close()
"""
# Sends N bytes to the server and prints the seconds until the server's count came back.
CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
t = time.monotonic(); c.sendall(b"x" * int(sys.argv[3])); c.shutdown(socket.SHUT_WR)
n = int(c.recv(64)); print(n, time.monotonic() - t)
"""


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's exit is reaped by init, at its own pace)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture
def skip_unless_possible():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


def _send(hosts: NamespaceHosts, src: int, dst: int, nbytes: int) -> float:
    out = hosts[src].run(
        [sys.executable, "-c", CLIENT, hosts[dst].address, str(PORT), str(nbytes)],
        capture_output=True,
        text=True,
        check=True,
    )
    received, seconds = out.stdout.split()
    assert int(received) == nbytes
    return float(seconds)


def test_hosts_talk_by_address_with_a_rate_limit(skip_unless_possible, tmp_path):
    with NamespaceHosts(3, tmp_path, rates={2: f"{LIMIT_MBIT}mbit"}) as hosts:
        assert len({h.address for h in hosts.hosts}) == 3
        assert len({h.root for h in hosts.hosts}) == 3 and all(h.root.is_dir() for h in hosts.hosts)
        server = hosts[0].popen(
            [sys.executable, "-c", SERVER, hosts[0].address, str(PORT)], stdout=subprocess.PIPE, text=True
        )
        assert server.stdout.readline().strip() == "listening"

        unlimited = _send(hosts, 1, 0, PAYLOAD)
        limited = _send(hosts, 2, 0, PAYLOAD)
        # The token bucket admits ~64 kB at once, then LIMIT_MBIT: the limited host cannot be faster than that.
        floor = (PAYLOAD - 64_000) * 8 / (LIMIT_MBIT * 1e6)
        assert limited >= 0.9 * floor, (limited, floor)
        assert limited > 3 * unlimited, (limited, unlimited)

        # The hosts are only on their own network: the machine's loopback server is not theirs.
        lo = hosts[1].run(
            [sys.executable, "-c", CLIENT, "127.0.0.1", str(PORT), "10"], capture_output=True, text=True
        )
        assert lo.returncode != 0 and "refused" in lo.stderr.lower()


def test_close_removes_everything_even_when_the_test_fails(skip_unless_possible, tmp_path):
    hosts = NamespaceHosts(2, tmp_path, rate="100mbit")
    namespaces = list(hosts.namespaces)
    assert len(namespaces) == 3  # the hub and two hosts
    proc = pids = None
    with pytest.raises(RuntimeError, match="the test failed"), hosts:
        # A process with a child the helper never saw, which outlives it on SIGTERM: both must go.
        proc = hosts[0].popen(["sh", "-c", "sleep 600 & sleep 600"], stdout=subprocess.DEVNULL)
        ns = hosts[0].namespace
        pids = wait_until(
            lambda: len(namespace_pids(ns)) >= 3 and namespace_pids(ns), 10, "the shell and its sleeps"
        )
        raise RuntimeError("the test failed")
    assert proc is not None and proc.poll() is not None
    assert not [pid for pid in pids if _running(pid)], "a process outlived its host"
    assert hosts.leftovers() == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in namespaces if ns in listed.split()]


def test_a_failed_build_removes_what_it_made(skip_unless_possible, tmp_path):
    # A rate tc cannot parse fails the build halfway (after the hub and host 0 exist): nothing may stay.
    with pytest.raises(RuntimeError, match="tbf"):
        NamespaceHosts(2, tmp_path, rates={1: "not-a-rate"}, prefix="aqhfail")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in listed.splitlines() if line.startswith("aqhfail")]
