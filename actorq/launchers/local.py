"""Local placement: every role as a subprocess ``python -m actorq.roles NAME ...`` (the same command as
``actorq role``), owned and stopped by pid.

Each role runs in a new session, so a terminal Ctrl-C reaches only the launcher, which then stops roles in order
(:class:`actorq.launchers.supervisor.Supervisor`). It signals only the pids it started; it never looks processes up
by name. Each role is also started with ``--stop-with-parent <launcher pid>``, so a launcher killed with -9 (which
cannot stop anything) leaves no role running: each notices and stops itself as on SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.topology import RoleSpec, role_command
from actorq.roles.process_setup import learner_environment
from actorq.status import ReplayStatus
from actorq.usage import child_environment

log = logging.getLogger(__name__)


@dataclass
class Child:
    """A role process this placement started."""

    spec: RoleSpec
    argv: list[str]
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


class LocalPlacement(Placement):
    """Roles as local subprocesses; restarted by the supervisor with the same argv."""

    name = "local"

    def __init__(self, run: RunContext):
        super().__init__(run)
        self.children: dict[str, Child] = {}
        (run.run_dir / "logs").mkdir(parents=True, exist_ok=True)

    def _spawn(self, child: Child) -> None:
        env = child_environment()  # quiet TF, unbuffered output, one math-library thread
        if child.spec.role == "learner":  # read by TensorFlow when it loads, so set before the process starts
            env.update(learner_environment(self.run.config))
        with child.log_path.open("ab") as out:
            # A new session: terminal Ctrl-C reaches only the launcher, which then stops roles in order.
            child.process = subprocess.Popen(
                child.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        log.debug("started %s pid %d", child.spec.label, child.pid)

    def start(self, spec: RoleSpec, address: str) -> None:
        run = self.run
        argv = role_command(
            spec,
            run.config_path,
            run.run_dir,
            address or f"localhost:{run.port}",
            run.replay_port(spec.index) if spec.role == "replay" else run.port,
            weights_key_file=run.weights_key_file,
            # Roles run in their own sessions: without this, a launcher killed with -9 would leave them running.
            parent_pid=os.getpid(),
        )
        child = Child(spec, argv, run.run_dir / "logs" / f"{spec.label}.log")
        self.children[spec.label] = child
        self._spawn(child)

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        child = self.children[spec.label]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if child.process.poll() is not None:
                raise RuntimeError(
                    f"replay server exited with {child.process.returncode}; see {child.log_path}"
                )
            record = self.status(spec.label)
            port = self.run.replay_port(spec.index)
            if isinstance(record, ReplayStatus) and record.port == port and record.pid == child.pid:
                return f"localhost:{port}"
            time.sleep(0.2)
        raise RuntimeError(f"replay server did not start within {timeout_s:.0f}s; see {child.log_path}")

    def exit_code(self, label: str) -> int | None:
        child = self.children.get(label)
        return None if child is None or child.process is None else child.process.poll()

    def restart(self, label: str) -> bool:
        self._spawn(self.children[label])
        return True

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        """SIGTERM each live role of ``labels``, wait up to ``grace_s`` for all of them, SIGKILL the rest."""
        children = [self.children[label] for label in labels if label in self.children]
        for child in children:
            if child.process and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM; killing it", child.spec.label, child.pid)
                child.process.kill()
                child.process.wait(timeout=5)
        return {c.spec.label: (c.process.returncode if c.process else None) for c in children}

    def where(self, label: str) -> str:
        child = self.children.get(label)
        return f"localhost pid {child.pid}" if child and child.pid else "-"

    def log_path(self, label: str) -> Path | None:
        child = self.children.get(label)
        return child.log_path if child else None

    def summary_extra(self) -> dict:
        return {}
