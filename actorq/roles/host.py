"""Running one role: the one host every placement runs a role in.

Wherever a role runs (its own process started by ``actorq role``: the local launcher, Docker, another host by
hand; a Launchpad node; a Ray worker; a thread of the in-process launcher), :class:`RoleHost` does the same steps:

1. when the role owns its process: pin it to ``affinity.<role>``'s cores and set the learner's environment, before
   TensorFlow or torch load (both are process-wide, so a role sharing its process, in-process, does neither);
2. resolve the run's weights key by the one rule (:func:`actorq.weights_key.find_key_file`);
3. build the role (:func:`build_role`; it connects to replay);
4. run its loop on a worker thread, so a stop is honoured even while the loop is blocked inside a native call (an
   actor's insert held by Reverb's rate limiter once the learner stopped);
5. at a stop, give the loop ``grace_s``; a loop still blocked then gets its metrics row AND its status record written
   here (:meth:`actorq.roles.base.RoleBase.report`), so the supervisor and a restarted role see its last counters.

:func:`main` is the process entry (``actorq role``, Launchpad's nodes): a host plus the stop signals.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.errors import ExitCode
from actorq.quantize.signing import WeightsKey
from actorq.roles.process_setup import (
    AffinityError,
    apply_learner_environment,
    pin_role_cpus,
    quiet_tensorflow,
)
from actorq.roles.signals import install_stop_handlers, stop_with_parent
from actorq.status import ROLE_NAMES, role_label
from actorq.weights_key import HOW_TO_FIX, KEY_ROLES, WeightsKeyError, resolve_weights_key

log = logging.getLogger(__name__)

STOP_GRACE_S = 4.0
"""How long a stopped role's loop may take to return before the host writes its records for it (shorter than the
launchers' ``ROLE_STOP_GRACE_S``, so the records are written before a launcher kills the process)."""

_FINISHED: list = []
"""Roles that have returned. Kept referenced so their destructors never run: Acme's adder flushes its Reverb
writer in ``__del__``, which blocks forever once replay is gone or rate-limited. A role process exits with
``os._exit`` right after its loop returns, so nothing needs them collected."""


def build_role(
    role: str,
    config: ExperimentConfig,
    run_dir: str | Path,
    address: str | None = None,
    index: int = 0,
    port: int | None = None,
    connect_timeout_s: float = 60,
    weights_key: WeightsKey | None = None,
    insecure_weights: bool = False,
):
    """Construct the role object (connects to replay; may raise ReplayUnreachableError).

    Raises:
        WeightsKeyError: A role that signs or verifies weights got no ``weights_key`` and no ``insecure_weights``.
    """
    quiet_tensorflow()
    if role in KEY_ROLES and weights_key is None and not insecure_weights:
        raise WeightsKeyError(f"role {role} needs the run's weights key; {HOW_TO_FIX}")
    keyed = {"weights_key": weights_key}
    if role == "replay":
        from actorq.roles.replay import ReplayRole

        return ReplayRole(config, run_dir, port=port, shard=index)
    if address is None:
        raise ValueError(f"role {role} needs --replay-address HOST:PORT")
    if role == "learner":
        from actorq.roles.learner import LearnerRole

        return LearnerRole(config, run_dir, address, connect_timeout_s, **keyed)
    if role == "quantizer":
        from actorq.roles.quantizer import QuantizerRole

        return QuantizerRole(config, run_dir, address, connect_timeout_s, **keyed)
    if role == "actor":
        from actorq.roles.actor import ActorRole

        return ActorRole(
            config, run_dir, address, actor_id=index, connect_timeout_s=connect_timeout_s, **keyed
        )
    if role == "evaluator":
        from actorq.roles.evaluator import EvaluatorRole

        return EvaluatorRole(config, run_dir, address, connect_timeout_s, **keyed)
    raise ValueError(f"unknown role {role!r}; choose one of: {', '.join(ROLE_NAMES)}")


class RoleHost:
    """One role, built and run as the module docstring says; every placement drives its roles through one.

    Args:
        role: Role name (:data:`actorq.status.ROLE_NAMES`).
        config: The run's resolved config.
        run_dir: The run directory (as this host sees it).
        address: Replay's HOST:PORT (None for replay).
        index: Actor index, or replay shard.
        port: Replay's port (replay only; None: the config's, else a free one).
        connect_timeout_s: How long to retry reaching replay.
        key_file: ``--weights-key-file``: the first step of the key rule (launchers pass the run's key file).
        insecure_weights: Run without a key (unsigned weights).
        own_process: The role is alone in its process: pin its CPUs, set the learner's environment, and report the
            process's CPU time as the role's. False for the in-process launcher's threads.
        environ: The environment the key rule reads (default: this process's).
        on_exit: Called on the loop's thread once the loop returned or raised (the host's ``code`` is set).
    """

    def __init__(
        self,
        role: str,
        config: ExperimentConfig,
        run_dir: str | Path,
        *,
        address: str | None = None,
        index: int = 0,
        port: int | None = None,
        connect_timeout_s: float = 60,
        key_file: str | Path | None = None,
        insecure_weights: bool = False,
        own_process: bool = True,
        environ: Mapping[str, str] | None = None,
        on_exit: Callable[[RoleHost], None] | None = None,
    ):
        self.role, self.config, self.run_dir = role, config, Path(run_dir)
        self.address, self.index, self.port = address, index, port
        self.connect_timeout_s = connect_timeout_s
        self.key_file, self.insecure_weights = key_file, insecure_weights
        self.own_process, self.environ, self.on_exit = own_process, environ, on_exit
        self.stop_event = threading.Event()
        self.key: WeightsKey | None = None
        """The key the role signs or verifies with (None: replay, or ``insecure_weights``)."""
        self.instance = None
        self.code: int | None = None
        """The loop's exit status once it returned (0) or raised (1); None while it runs."""
        self.error = ""
        """``Type: message`` of the exception the loop raised."""
        self._thread: threading.Thread | None = None

    def build(self) -> None:
        """Steps 1-3: CPUs and environment (own process only), the key, the role.

        Raises:
            AffinityError: ``affinity.<role>`` names cores this host does not allow.
            WeightsKeyError: No usable key (and not ``insecure_weights``).
            ReplayUnreachableError: Replay did not answer within ``connect_timeout_s``.
        """
        if self.own_process:
            # Before anything below loads TensorFlow or torch, which size their thread pools by the usable cores.
            pin_role_cpus(self.config, self.role, self.index)
            if self.role == "learner":  # before replay's import of reverb loads TensorFlow
                apply_learner_environment(self.config)
        if self.role in KEY_ROLES:
            self.key = resolve_weights_key(self.run_dir, self.key_file, self.insecure_weights, self.environ)
        self.instance = build_role(
            self.role,
            self.config,
            self.run_dir,
            self.address,
            self.index,
            self.port,
            self.connect_timeout_s,
            weights_key=self.key,
            insecure_weights=self.insecure_weights,
        )
        # Process-wide figures such as CPU time belong to this role alone only when it owns its process.
        self.instance.own_process = self.own_process
        _FINISHED.append(self.instance)

    def start(self) -> None:
        """Step 4: run the role's loop on a worker thread (after :meth:`build`)."""
        self._thread = threading.Thread(target=self._loop, name=f"{self.label}-loop", daemon=True)
        self._thread.start()

    @property
    def label(self) -> str:
        """``actor_<i>`` for actors, ``replay`` / ``replay_<k>`` for replay shards, else the role name."""
        return role_label(self.role, self.index)

    def _loop(self) -> None:
        try:
            self.instance.run(self.stop_event)
            self.code = ExitCode.OK
        except (
            BaseException
        ) as exc:  # the role failed: its error goes to the log and to whoever watches the host
            log.error("role %s failed:\n%s", self.label, traceback.format_exc())
            self.error = f"{type(exc).__name__}: {exc}"
            self.code = ExitCode.FAILED
            self.stop_event.set()
        finally:
            if self.on_exit is not None:
                self.on_exit(self)

    def running(self) -> bool:
        """True while the loop runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        """Step 5: ask the loop to finish, wait up to ``grace_s``; returns the exit status (0 ok, 1 failed).

        A loop still blocked after ``grace_s`` gets its metrics row and status record written here, and counts as
        stopped (0): its process, or the launcher, ends it.
        """
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=grace_s)
        if self.running():
            log.warning(
                "role %s loop still blocked %.0fs after stop; writing its records", self.label, grace_s
            )
            try:
                self.instance.report()
                self.instance.close()
            except Exception as exc:  # best effort: the blocked loop may be mid-write
                log.warning("final metrics and status flush failed: %s", exc)
            return ExitCode.OK
        return self.code if self.code is not None else ExitCode.OK

    def wait(self, stop: threading.Event, grace_s: float = STOP_GRACE_S) -> int:
        """Run until ``stop`` is set or the loop ends by itself, then :meth:`stop`; returns the exit status."""
        while self.running() and not stop.wait(timeout=0.5):
            pass
        return self.stop(grace_s)


def main(
    role: str,
    config: ExperimentConfig,
    run_dir: str | Path,
    address: str | None = None,
    index: int = 0,
    port: int | None = None,
    connect_timeout_s: float = 60,
    stop: threading.Event | None = None,
    key_file: str | Path | None = None,
    insecure_weights: bool = False,
    parent_pid: int | None = None,
) -> int:
    """Run one role in this process until stopped; returns the exit status (0 ok, 1 failed, 3 replay unreachable).

    ``key_file``/``insecure_weights``: see :class:`RoleHost`. ``parent_pid``: stop as on SIGTERM once that process is
    no longer this one's parent (:func:`actorq.roles.signals.stop_with_parent`); launchers pass their own pid.

    Raises:
        WeightsKeyError: No usable weights key: the user's mistake (``actorq role`` prints it, exit status 2).
    """
    stop = stop or threading.Event()
    install_stop_handlers(stop)
    if parent_pid is not None:
        stop_with_parent(parent_pid)
    host = RoleHost(
        role,
        config,
        run_dir,
        address=address,
        index=index,
        port=port,
        connect_timeout_s=connect_timeout_s,
        key_file=key_file,
        insecure_weights=insecure_weights,
    )
    try:
        host.build()
    except AffinityError as exc:
        log.error("%s", exc)
        return ExitCode.FAILED
    except WeightsKeyError:
        raise
    except Exception as exc:
        # Imported only now: actorq.replay loads TensorFlow, which must come after the learner's environment.
        from actorq.replay.client import ReplayUnreachableError

        if not isinstance(exc, ReplayUnreachableError):
            raise
        log.error("%s", exc)
        return ExitCode.UNREACHABLE
    host.start()
    return host.wait(stop)
