"""The bench workers' line protocol, both ends: the bench's handle on a worker process, and the worker's loop.

A bench worker is ``python -m MODULE ...``, started by a bench in a session of its own and owned by its pid. It
reads one JSON command per line on stdin and answers ``@@tag payload`` lines on its original stdout; whatever it or
its libraries print goes to stderr, the worker's log file, which every error about it names.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from actorq.usage import setup_logging

log = logging.getLogger(__name__)


class BenchWorker:
    """Bench side: one worker process (``python -m`` + ``argv``), owned by pid, speaking ``@@tag payload`` lines.

    Args:
        label: How errors name it (``"replay bench worker 2"``).
        argv: The module and its arguments.
        log_path: Its stderr (appended to).
        env: Its environment.
        prefix: A command that runs it, e.g. ``["ip", "netns", "exec", NS]`` (it must exec the worker, so that
            the pid owned is the worker's).
    """

    def __init__(
        self,
        label: str,
        argv: list[str],
        log_path: Path,
        env: dict[str, str],
        prefix: Sequence[str] = (),
    ):
        self.label = label
        self.log_path = log_path
        with log_path.open("ab") as logf:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=logf,
                start_new_session=True,
                env=env,
                text=True,
            )
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def send(self, command: dict[str, Any]) -> None:
        """Write one JSON command line."""
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def expect(self, tag: str, timeout_s: float) -> str:
        """The payload of the next ``@@tag`` line (other lines are skipped).

        Raises:
            RuntimeError: On ``@@error``, the worker's exit, or no ``@@tag`` within ``timeout_s``; naming the log.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.05, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                line = None
            if line is not None:
                head, _, rest = line.partition(" ")
                if head == f"@@{tag}":
                    return rest
                if head == "@@error":
                    raise RuntimeError(f"{self.label} failed: {rest} (log: {self.log_path})")
                continue
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.label} sent no @@{tag} within {timeout_s:.0f}s; see {self.log_path}"
                )

    def request_exit(self) -> None:
        """Ask the worker to exit (an ``exit`` command, then end of input); returns at once."""
        with contextlib.suppress(OSError, ValueError):
            self.send({"cmd": "exit"})
            self.proc.stdin.close()

    def wait(self, timeout_s: float) -> None:
        """Wait for the worker to exit; kill it (by its pid) if it has not within ``timeout_s``."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) did not exit; killing it", self.label, self.proc.pid)
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 20) -> None:
        """:meth:`request_exit`, then :meth:`wait`."""
        self.request_exit()
        self.wait(timeout_s)


def open_protocol() -> TextIO:
    """Worker side, first thing: the protocol's stream on the original stdout, warnings logged to stderr.

    From here on stdout itself goes to stderr (the log), so nothing a library prints can corrupt the protocol.
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    setup_logging("WARNING")  # on stderr, the worker's log
    return proto


def serve(
    proto: TextIO, handle: Callable[[dict[str, Any]], str], what: str, close: Callable[[], None] | None = None
) -> NoReturn:
    """Worker side, last thing: answer the commands on stdin until ``exit`` (or end of input), then ``close()``
    and end the process.

    ``handle(command)`` returns the reply line (``@@tag payload``, see :func:`reply`); an exception in it is
    logged and answered ``@@error Type: message`` (the bench then stops).
    """
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            if cmd["cmd"] == "exit":
                break
            proto.write(handle(cmd) + "\n")
        except Exception as exc:  # reported to the bench, which stops
            log.exception("%s command failed", what)
            proto.write(f"@@error {type(exc).__name__}: {exc}\n")
    proto.flush()
    if close is not None:
        close()
    # Reverb/TF native threads can hold up interpreter teardown; every result has been sent by now.
    os._exit(0)


def reply(tag: str, payload: Any = None) -> str:
    """A ``@@tag`` line, with ``payload`` as JSON when given."""
    return f"@@{tag}" if payload is None else f"@@{tag} " + json.dumps(payload)
