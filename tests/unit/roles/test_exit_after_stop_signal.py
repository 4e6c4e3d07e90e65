"""A run asked to stop ends within its deadline even when its main thread is stuck where no Python handler acts
(the in-process launcher once hung in an import-lock deadlock and ignored SIGTERM and stop-with-parent)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# A stuck run: its SIGTERM handler only sets a flag (as the supervisor's does) and its main thread never looks at
# it, blocked on a lock nothing releases.
STUCK = textwrap.dedent(
    """
    import signal, threading
    from actorq.roles.signals import exit_after_stop_signal
    flag = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: flag.set())
    exit_after_stop_signal(1.0)
    lock = threading.Lock()
    lock.acquire()
    print("ready", flush=True)
    while True:
        lock.acquire()
    """
)


@pytest.mark.subprocess
def test_sigterm_ends_a_process_whose_main_thread_is_stuck():
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)  # the deadline is 1 s; a process that ignores it is killed below
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read()
    assert code == 1 and took < 20, (code, took, stderr[-2000:])
    # It said why it was going, and left every thread's stack (faulthandler's dump) to say where it was stuck.
    assert "SIGTERM: this process exits in 1 s" in stderr
    assert "Timeout (0:00:01)!" in stderr and "most recent call first" in stderr
