"""In-process launcher: every role as a thread of one process (Sample Factory's serial mode, for debugging and
integration tests). Same roles, same Reverb tables, same metrics files as the multi-process launchers.

Stopping keeps the launchers' promises: on completion, a failed role, Ctrl-C or SIGTERM (handled when the
launcher runs in the main thread) the learner is stopped first, while actors still feed replay, so it finishes its
step and checkpoints; then the other roles; replay last, so the others can flush. ``summary.json`` lists the roles
in the order they ended (``role_end_order``) and CPU time (``energy``: here all of it is the launcher's process).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path

from actorq.config import ExperimentConfig, save_config
from actorq.launchers.energy import EnergyMeter
from actorq.launchers.local import EXIT_CODES
from actorq.launchers.monitor import RunMonitor, format_summary
from actorq.launchers.topology import topology
from actorq.roles import build_role
from actorq.roles.weights_key import describe, ensure_run_key, load_key_file

log = logging.getLogger(__name__)


def run_inprocess(
    config: ExperimentConfig,
    run_dir: str | Path,
    quiet: bool = False,
    poll_s: float = 0.5,
    insecure_weights: bool = False,
) -> int:
    """Run all roles as threads until a stop condition; write summary.json; return 0 (1 if a role failed, 130 if
    interrupted by Ctrl-C or SIGTERM).

    The run's weights key is created (or, resuming, reused) in RUN_DIR/secrets unless ``insecure_weights``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = None if insecure_weights else load_key_file(ensure_run_key(run_dir))
    keyed = {"weights_key": key, "insecure_weights": insecure_weights}
    if not (run_dir / "config.yaml").exists():
        save_config(config, run_dir / "config.yaml")
    stop_learner, stop_others = threading.Event(), threading.Event()
    failed, interrupted = threading.Event(), threading.Event()
    errors: list[str] = []
    threads: list[tuple[str, threading.Thread]] = []
    ended: list[str] = []  # role labels in the order their threads returned
    monitor = RunMonitor(config, run_dir)

    def runner(instance, label, stop):
        try:
            instance.run(stop)
        except Exception as exc:  # a failed role ends the run, with its error in the summary
            log.exception("%s failed", label)
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
            failed.set()
        finally:
            ended.append(label)

    def on_signal(signum, _frame):
        log.warning("%s: stopping the run (learner first)", signal.Signals(signum).name)
        interrupted.set()

    reason = "role_failed"
    with EnergyMeter(run_dir) as energy:
        replay = build_role("replay", config, run_dir)
        address = f"localhost:{replay.port}"
        replay_stop = threading.Event()  # replay outlives the others so they can flush
        replay_thread = threading.Thread(target=replay.run, args=(replay_stop,), name="replay", daemon=True)
        replay_thread.start()
        previous = {}
        if threading.current_thread() is threading.main_thread():  # Python signals only the main thread
            previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            for sig in previous:
                signal.signal(sig, on_signal)
        try:
            for spec in topology(config)[1:]:
                instance = build_role(spec.role, config, run_dir, address=address, index=spec.index, **keyed)
                stop = stop_learner if spec.role == "learner" else stop_others
                thread = threading.Thread(
                    target=runner, args=(instance, spec.label, stop), name=spec.label, daemon=True
                )
                thread.start()
                threads.append((spec.role, thread))
            monitor.started = time.time()
            while True:
                if failed.is_set():
                    reason = "role_failed"
                    break
                if interrupted.is_set():
                    reason = "interrupted"
                    break
                reason = monitor.stop_reason() or ""
                if reason:
                    break
                failed.wait(poll_s)
        except KeyboardInterrupt:
            reason = "interrupted"
        except Exception as exc:
            errors.append(f"startup: {type(exc).__name__}: {exc}")
            log.exception("in-process start-up failed")
        finally:
            wall = time.time() - monitor.started
            # The learner first, while actors still feed replay (a learner waiting on the rate limiter with no
            # actors left would never finish its step and checkpoint); then the others; replay last.
            stop_learner.set()
            for _, thread in (t for t in threads if t[0] == "learner"):
                thread.join(timeout=30)
            stop_others.set()
            for _, thread in (t for t in threads if t[0] != "learner"):
                thread.join(timeout=30)
            replay_stop.set()
            replay_thread.join(timeout=30)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    alive = [t.name for _, t in threads if t.is_alive()]
    extra = {"launcher": "inprocess", "errors": errors, "threads_alive_after_stop": alive}
    extra["role_end_order"] = list(ended)
    extra["weights_signing"] = describe(key)
    extra["energy"] = energy.summary()
    summary = monitor.write_summary("role_failed" if errors else reason, wall_seconds=wall, extra=extra)
    if not quiet:
        sys.stdout.write(format_summary(summary) + "\n")
    return EXIT_CODES.get(summary["exit"], 1)
