"""One module per process: replay, learner, quantizer, actor, evaluator.

Each holds a class with ``step()``/``run(stop)``; :func:`main` builds one from a config and runs it until SIGTERM or
SIGINT, which is how ``actorq role NAME`` (and so the local, launchpad and Docker launchers) start processes.
Heavy imports (TensorFlow, torch, reverb) happen inside :func:`main`, so importing this package is cheap.

Every role but replay handles weight messages and needs the run's weights key (:mod:`actorq.roles.weights_key`);
without one it refuses to start unless it is told ``insecure_weights``.
"""

from __future__ import annotations

import logging
import threading
import traceback
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.quantize.signing import WeightsKey
from actorq.roles.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    AffinityError,
    apply_learner_environment,
    install_stop_handlers,
    pin_role_cpus,
    quiet_tensorflow,
    stop_with_parent,
)
from actorq.roles.weights_key import HOW_TO_FIX, KEY_ROLES, WeightsKeyError

log = logging.getLogger(__name__)

ROLE_NAMES = ("replay", "learner", "quantizer", "actor", "evaluator")

_FINISHED: list = []
"""Roles that have returned. Kept referenced so their destructors never run: Acme's adder flushes its Reverb
writer in ``__del__``, which blocks forever once replay is gone or rate-limited. A role process exits with
``os._exit`` right after ``main`` returns, so nothing needs them collected."""


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

        return ReplayRole(config, run_dir, port=port)
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


def main(
    role: str,
    config: ExperimentConfig,
    run_dir: str | Path,
    address: str | None = None,
    index: int = 0,
    port: int | None = None,
    connect_timeout_s: float = 60,
    stop: threading.Event | None = None,
    weights_key: WeightsKey | None = None,
    insecure_weights: bool = False,
    parent_pid: int | None = None,
) -> int:
    """Run one role until stopped; returns the process exit status (0 ok, 1 failed, 3 replay unreachable).

    ``weights_key``/``insecure_weights``: see :func:`build_role` (resolve a key with
    :func:`actorq.roles.weights_key.resolve_weights_key`). ``parent_pid``: stop as on SIGTERM once that process is
    no longer this one's parent (:func:`actorq.roles.common.stop_with_parent`); launchers pass their own pid.
    """
    try:  # before anything below loads TensorFlow or torch, which size their thread pools by the usable cores
        pin_role_cpus(config, role)
    except AffinityError as exc:
        log.error("%s", exc)
        return EXIT_FAILED
    if role == "learner":  # before anything below loads TensorFlow (replay imports reverb, which imports TF)
        apply_learner_environment(config)
    from actorq.replay.client import ReplayUnreachableError

    stop = stop or threading.Event()
    install_stop_handlers(stop)
    if parent_pid is not None:
        stop_with_parent(parent_pid)
    try:
        instance = build_role(
            role, config, run_dir, address, index, port, connect_timeout_s, weights_key, insecure_weights
        )
    except ReplayUnreachableError as exc:
        log.error("%s", exc)
        return EXIT_UNREACHABLE
    except WeightsKeyError as exc:
        log.error("%s", exc)
        return EXIT_FAILED
    # main() is the entry point of a role's own process (`actorq role`, launchpad's node), so process-wide
    # figures such as CPU time belong to this role alone (not so in the in-process launcher).
    instance.own_process = True
    _FINISHED.append(instance)
    return _run_until_stopped(role, instance, stop)


def _run_until_stopped(role: str, instance, stop: threading.Event, grace_s: float = 4.0) -> int:
    """Run the role's loop on a worker thread, so a stop request is honoured even while the loop is blocked
    inside a native call (e.g. an actor's insert held back by Reverb's rate limiter once the learner stopped)."""
    outcome: dict[str, BaseException] = {}

    def body():
        try:
            instance.run(stop)
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc
            outcome["trace"] = traceback.format_exc()
            stop.set()

    worker = threading.Thread(target=body, name=f"{role}-loop", daemon=True)
    worker.start()
    while worker.is_alive() and not stop.wait(timeout=0.5):
        pass
    worker.join(timeout=grace_s)
    if "error" in outcome:
        log.error("role %s failed:\n%s", role, outcome["trace"])
        return EXIT_FAILED
    if worker.is_alive():
        # Still blocked in native code: record what we have and leave; the process exit ends the thread.
        log.warning(
            "role %s loop still blocked %.0fs after stop; flushing metrics and exiting", role, grace_s
        )
        try:
            instance.report()
            instance.close()
        except Exception as exc:  # best effort: the files may be mid-write by the blocked loop
            log.warning("final metrics flush failed: %s", exc)
    return EXIT_OK
