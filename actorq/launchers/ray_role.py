"""One ActorQ role inside a Ray actor: what :class:`~actorq.launchers.ray_placement.RayPlacement` starts per role.

The constructor builds the role (so a restart by Ray's ``max_restarts`` rebuilds it, and the role resumes its
counters and weights floor from its role directory like a restarted ``actorq role`` process) and starts the role's
loop on a thread; the actor is threaded (``max_concurrency`` > 1) so :meth:`RoleActor.status`,
:meth:`RoleActor.stop` and :meth:`RoleActor.where` answer while the loop runs.

Only plain values cross Ray: the config as its dict (:func:`actorq.config.to_dict`), paths, the status record as
:func:`actorq.status.to_dict`. The weights key never does: each role reads the key file the launcher names on its own
host, by the one key rule (:func:`actorq.weights_key.find_key_file`), and tells the placement the run id of
what it read (:meth:`RoleActor.where`), so summary.json names the key the roles actually use.

This module imports no Ray at import time (Ray loads it in its workers; ``import actorq.launchers`` needs no Ray).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from actorq.config import config_from_dict
from actorq.errors import ExitCode
from actorq.launchers.ray_starts import record_start
from actorq.roles import RoleHost
from actorq.status import to_dict
from actorq.usage import setup_logging
from actorq.weights_key import describe

log = logging.getLogger(__name__)


def _log_to_file(path: Path) -> None:
    """Send this worker's log records to the role's console log (Ray's own worker logs stay where Ray puts them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    setup_logging(handler=logging.FileHandler(path))


def _exit_on_failure(host: RoleHost) -> None:
    """A crash ends the worker process, so Ray restarts the role (within max_restarts) or reports it dead for good,
    exactly as for a kill -9; a role sitting failed inside a live actor would do neither."""
    if host.error:
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(ExitCode.FAILED)


class RoleActor:
    """A role running in this Ray worker process (a :class:`~actorq.roles.host.RoleHost`); ``ray.remote(...)`` is
    applied by the placement."""

    def __init__(
        self,
        role: str,
        label: str,
        config_data: dict[str, Any],
        run_dir: str,
        address: str | None,
        index: int,
        port: int | None,
        key_file: str | None,
        insecure_weights: bool,
    ):
        """Build the role and start its loop.

        Args:
            role: Role name (replay, learner, quantizer, actor, evaluator).
            label: The role's label (``actor_<i>`` for actors): its directory and log name.
            config_data: The resolved config as :func:`actorq.config.to_dict` wrote it.
            run_dir: The run directory (shared with the launcher's host, or this host's own copy).
            address: Replay's HOST:PORT (None for replay).
            index: Actor index.
            port: Replay's port (replay only; 0 or None: pick a free one on this host).
            key_file: The run's weights key file as the launcher names it (the key rule's first step).
            insecure_weights: Run without a weights key (unsigned weights).

        Raises:
            WeightsKeyError: No usable key on this host.
            ReplayUnreachableError: Replay did not answer in time.
        """
        self.label = label
        self.run_dir = Path(run_dir)
        _log_to_file(self.run_dir / "logs" / f"{label}.log")
        record_start(label)  # first: a restart that dies while building its role still counts
        self.host = RoleHost(
            role,
            config_from_dict(config_data),
            run_dir,
            address=address,
            index=index,
            port=port or None,
            key_file=key_file,
            insecure_weights=insecure_weights,
            on_exit=_exit_on_failure,
        )
        try:
            self.host.build()
        except (
            Exception
        ) as exc:  # Ray reports the actor dead; the reason goes to the role's log, where people look
            log.error("%s could not start on %s: %s", label, socket.gethostname(), exc)
            raise
        self.instance = self.host.instance
        self.host.start()
        log.info("%s running in Ray worker pid %d on %s", label, os.getpid(), socket.gethostname())

    # -- called by the placement -----------------------------------------------------------------------------
    def address(self) -> str:
        """Replay's NODE_IP:PORT, reachable from the other nodes (replay only)."""
        import ray

        return f"{ray.util.get_node_ip_address()}:{self.instance.port}"

    def status(self) -> dict[str, Any]:
        """The role's current status record as plain values (what it would write to its status.json)."""
        return to_dict(self.instance.status_record())

    def exit_status(self) -> int | None:
        """None while the loop runs; its exit status once it returned."""
        return None if self.host.running() else self.host.code

    def stop(self, grace_s: float) -> int:
        """Ask the loop to finish, wait up to ``grace_s``; returns the exit status (:meth:`RoleHost.stop`: a loop
        still blocked gets its metrics and status written; the placement then kills the process)."""
        return self.host.stop(grace_s)

    def where(self) -> dict[str, Any]:
        """Node id, node IP, host name and pid of this worker, and the run id of the weights key the role loaded
        ("" when unsigned or replay)."""
        import ray

        context = ray.get_runtime_context()
        return {
            "node_id": context.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "weights_run_id": describe(self.host.key)["run_id"] if self.host.key else "",
        }
