"""In-process launcher: every role as a thread of one process (Sample Factory's serial mode, for debugging and
integration tests). Same roles, same Reverb tables, same metrics files as the multi-process launchers."""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

from actorq.config import ExperimentConfig, save_config
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
    """Run all roles as threads until a stop condition; write summary.json; return 0 (1 if a role failed).

    The run's weights key is created (or, resuming, reused) in RUN_DIR/secrets unless ``insecure_weights``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = None if insecure_weights else load_key_file(ensure_run_key(run_dir))
    keyed = {"weights_key": key, "insecure_weights": insecure_weights}
    if not (run_dir / "config.yaml").exists():
        save_config(config, run_dir / "config.yaml")
    stop = threading.Event()
    errors: list[str] = []
    threads: list[threading.Thread] = []
    monitor = RunMonitor(config, run_dir)

    replay = build_role("replay", config, run_dir)
    address = f"localhost:{replay.port}"

    def runner(instance, label):
        try:
            instance.run(stop)
        except Exception as exc:  # a failed role ends the run, with its error in the summary
            log.exception("%s failed", label)
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
            stop.set()

    replay_stop = threading.Event()  # replay outlives the others so they can flush
    replay_thread = threading.Thread(target=replay.run, args=(replay_stop,), name="replay", daemon=True)
    replay_thread.start()
    reason = "role_failed"
    try:
        for spec in topology(config)[1:]:
            instance = build_role(spec.role, config, run_dir, address=address, index=spec.index, **keyed)
            thread = threading.Thread(
                target=runner, args=(instance, spec.label), name=spec.label, daemon=True
            )
            thread.start()
            threads.append(thread)
        monitor.started = time.time()
        while not stop.is_set():
            reason = monitor.stop_reason() or ""
            if reason:
                break
            time.sleep(poll_s)
        else:
            reason = "role_failed"
    except KeyboardInterrupt:
        reason = "interrupted"
    except Exception as exc:
        errors.append(f"startup: {type(exc).__name__}: {exc}")
        log.exception("in-process start-up failed")
    finally:
        wall = time.time() - monitor.started
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        replay_stop.set()
        replay_thread.join(timeout=30)
    alive = [t.name for t in threads if t.is_alive()]
    extra = {"launcher": "inprocess", "errors": errors, "threads_alive_after_stop": alive}
    extra["weights_signing"] = describe(key)
    summary = monitor.write_summary("role_failed" if errors else reason, wall_seconds=wall, extra=extra)
    if not quiet:
        sys.stdout.write(format_summary(summary) + "\n")
    if reason == "interrupted" and not errors:
        return 130
    return 1 if errors else 0
