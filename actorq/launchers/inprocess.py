"""In-process placement: every role as a thread of one process (Sample Factory's serial mode, for debugging and
integration tests). Same roles, same Reverb tables, same status records and metrics files as the multi-process
placements, driven by the same :class:`~actorq.launchers.supervisor.Supervisor`.

Every role runs in a :class:`~actorq.roles.host.RoleHost` that does not own its process. Threads cannot be killed:
a stop sets the roles' stop events and waits for their threads (:data:`JOIN_TIMEOUT_S` per stop phase; a thread
still blocked then gets its metrics and status written by its host); a role that raised counts as exited with
status 1, and its error goes into summary.json (``errors``), with the order roles ended (``role_end_order``) and any
thread still alive after the stop. For the same reason, run it without a samples-per-insert limit
(``replay.samples_per_insert=0``): once the learner has stopped, an actor's write held by the rate limiter cannot be
interrupted, and the process can only end by aborting (the multi-process launchers end such a role's process
instead).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.topology import RoleSpec
from actorq.roles import RoleHost

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 30.0
"""How long a stop phase waits for its roles' threads at least (a learner's final checkpoint can take a while
here, with every role's thread in one process): a run stops within 3 x 30 = 90 s at worst."""


class InProcessPlacement(Placement):
    """Roles as threads, each a :class:`~actorq.roles.host.RoleHost` that does not own its process (no CPU pinning,
    no learner environment: both would apply to every role); a role that fails ends the run (threads are not
    restarted)."""

    name = "inprocess"

    def __init__(self, run: RunContext):
        super().__init__(run)
        pinned = {k: v for k, v in vars(run.config.affinity).items() if v}
        if pinned:
            log.warning("in-process launcher: roles share one process, so affinity %s is ignored", pinned)
        self.roles: dict[str, RoleHost] = {}
        self.errors: list[str] = []
        self.ended: list[str] = []  # role labels in the order their threads returned
        self._lock = threading.Lock()

    def start(self, spec: RoleSpec, address: str) -> None:
        run = self.run
        host = RoleHost(
            spec.role,
            run.config,
            run.run_dir,
            address=address or None,
            index=spec.index,
            port=run.replay_port(spec.index) if spec.role == "replay" else None,
            key_file=run.weights_key_file,
            insecure_weights=run.weights_key_file is None,
            own_process=False,
            on_exit=self._ended,
        )
        host.build()  # in this thread: replay serves once built, and a role that cannot start fails the run now
        self.roles[spec.label] = host
        host.start()

    def _ended(self, host: RoleHost) -> None:
        with self._lock:
            if host.error:  # a failed role ends the run, with its error in the summary
                self.errors.append(f"{host.label}: {host.error}")
            if host.role != "replay":
                self.ended.append(host.label)

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        # The replay role serves once built (start built it in this thread).
        return f"localhost:{self.roles[spec.label].instance.port}"

    def exit_code(self, label: str) -> int | None:
        host = self.roles.get(label)
        return None if host is None or host.running() else host.code

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        """Set each role's stop event, then wait for the phase's threads together: at most ``max(grace_s,
        JOIN_TIMEOUT_S)`` for all of them (so a run stops within three times that, one wait per stop phase)."""
        hosts = [self.roles[label] for label in labels if label in self.roles]
        for host in hosts:
            host.stop_event.set()
        deadline = time.monotonic() + max(grace_s, JOIN_TIMEOUT_S)
        return {host.label: host.stop(max(0.0, deadline - time.monotonic())) for host in hosts}

    def where(self, label: str) -> str:
        return f"thread {label}" if label in self.roles else "-"

    def summary_extra(self) -> dict:
        alive = [label for label, host in self.roles.items() if host.running()]
        return {
            "errors": list(self.errors),
            "threads_alive_after_stop": alive,
            "role_end_order": list(self.ended),
        }


def run_inprocess(
    config: ExperimentConfig,
    run_dir: str | Path,
    quiet: bool = False,
    poll_s: float = 0.5,
    insecure_weights: bool = False,
) -> int:
    """``actorq train`` with ``launcher=inprocess`` (for tests and debugging): the same :func:`actorq.launchers.train.
    launch`, config checks included; returns 0 (1 if a role failed, 130 if interrupted by Ctrl-C or SIGTERM).

    The run's weights key is created (or, resuming, reused) in RUN_DIR/secrets unless ``insecure_weights``.
    """
    from actorq.config import replace
    from actorq.launchers.train import launch

    return launch(
        replace(config, launcher="inprocess"),
        Path(run_dir),
        quiet=quiet,
        insecure_weights=insecure_weights,
        poll_s=poll_s,
    )
