"""One ActorQ role inside a Ray actor: what :class:`~actorq.launchers.ray_placement.RayPlacement` starts per role.

The constructor builds the role (so a restart by Ray's ``max_restarts`` rebuilds it, and the role resumes its
counters and weights floor from its role directory like a restarted ``actorq role`` process) and starts the role's
loop on a thread; the actor is threaded (``max_concurrency`` > 1) so :meth:`RoleActor.status`,
:meth:`RoleActor.stop` and :meth:`RoleActor.where` answer while the loop runs.

Only plain values cross Ray: the config as its dict (:func:`actorq.config.to_dict`), paths, the status record as
:func:`actorq.status.to_dict`. The weights key never does: each role reads it on its own host, from
``$ACTORQ_WEIGHTS_KEY_FILE`` when that is set there, else from the key file path the launcher passed.

This module imports no Ray at import time (Ray loads it in its workers; ``import actorq.launchers`` needs no Ray).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from actorq.config import config_from_dict
from actorq.roles import build_role
from actorq.roles.common import EXIT_FAILED, EXIT_OK, apply_learner_environment, pin_role_cpus
from actorq.roles.weights_key import KEY_ENV, KEY_ROLES, resolve_weights_key
from actorq.status import to_dict

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname).1s [%(process)d %(name)s] %(message)s"


def _log_to_file(path: Path) -> None:
    """Send this worker's log records to the role's console log (Ray's own worker logs stay where Ray puts them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%H:%M:%S"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("absl", "tensorflow", "h5py", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class RoleActor:
    """A role running in this Ray worker process; ``ray.remote(...)`` is applied by the placement."""

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
            key_file: The run's weights key file as the launcher sees it; ``$ACTORQ_WEIGHTS_KEY_FILE`` on this host
                wins over it.
            insecure_weights: Run without a weights key (unsigned weights).

        Raises:
            WeightsKeyError: No usable key on this host.
            ReplayUnreachableError: Replay did not answer in time.
        """
        self.role, self.label = role, label
        self.run_dir = Path(run_dir)
        _log_to_file(self.run_dir / "logs" / f"{label}.log")
        config = config_from_dict(config_data)
        if role == "learner":  # already in the environment (runtime_env); this only warns if TF loaded first
            apply_learner_environment(config)
        try:
            # Before anything below loads TensorFlow or torch, which size their thread pools by the usable cores.
            pin_role_cpus(config, role)
            key = None
            if role in KEY_ROLES and not insecure_weights:
                key = resolve_weights_key(run_dir, os.environ.get(KEY_ENV) or key_file)
            self.instance = build_role(
                role,
                config,
                run_dir,
                address,
                index,
                port or None,
                weights_key=key,
                insecure_weights=insecure_weights,
            )
        except (
            Exception
        ) as exc:  # Ray reports the actor dead; the reason goes to the role's log, where people look
            log.error("%s could not start on %s: %s", label, socket.gethostname(), exc)
            raise
        # This worker process runs this role alone, so process-wide figures (CPU time) are the role's.
        self.instance.own_process = True
        self.stop_event = threading.Event()
        self.code: int | None = None
        self.started = time.time()
        self._thread = threading.Thread(target=self._loop, name=f"{label}-loop", daemon=True)
        self._thread.start()
        log.info("%s running in Ray worker pid %d on %s", label, os.getpid(), socket.gethostname())

    def _loop(self) -> None:
        try:
            self.instance.run(self.stop_event)
        except BaseException:
            log.error("role %s failed:\n%s", self.label, traceback.format_exc())
            for handler in logging.getLogger().handlers:
                handler.flush()
            # A crash ends the worker process, so Ray restarts the role (within max_restarts) or reports it dead
            # for good, exactly as for a kill -9; a role sitting failed inside a live actor would do neither.
            os._exit(EXIT_FAILED)
        self.code = EXIT_OK

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
        return self.code

    def stop(self, grace_s: float) -> int:
        """Ask the loop to finish, wait up to ``grace_s``; returns the exit status (flushes metrics if still blocked).

        A loop still blocked in a native call (an actor's insert held by Reverb's rate limiter) gets its metrics
        and status written here; the placement then kills the process.
        """
        self.stop_event.set()
        self._thread.join(timeout=grace_s)
        if self._thread.is_alive():
            log.warning("%s loop still blocked %.0fs after stop; flushing metrics", self.label, grace_s)
            try:
                self.instance.write_metrics()
                self.instance.close()
            except Exception as exc:  # best effort: the blocked loop may be mid-write
                log.warning("final metrics flush failed: %s", exc)
            return EXIT_OK
        return self.code if self.code is not None else EXIT_OK

    def where(self) -> dict[str, Any]:
        """Node id, node IP, host name and pid of this worker."""
        import ray

        context = ray.get_runtime_context()
        return {
            "node_id": context.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
