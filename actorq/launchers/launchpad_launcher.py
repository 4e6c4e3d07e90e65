"""Launchpad launcher: the same roles as PyNodes of one ``lp.Program``, LOCAL_MULTI_PROCESSING, output in the
current terminal (each node's lines prefixed and coloured by launchpad).

Nodes carry only strings and ints (role name, config path, run dir, address), so what launchpad serialises for its
subprocesses is a reference to :func:`run_role_node` plus plain values, never data from the network.
Stopping: the launcher signals the processes launchpad started for this program (by the pids launchpad's worker
manager recorded), the learner first so it checkpoints while actors still feed it, then SIGKILLs what is left
after a grace period.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from pathlib import Path

import psutil

from actorq.config import ExperimentConfig
from actorq.launchers.energy import EnergyMeter
from actorq.launchers.local import EXIT_CODES, ROLE_STOP_GRACE_S, LauncherBase
from actorq.launchers.monitor import RunMonitor, format_summary
from actorq.launchers.topology import topology

log = logging.getLogger(__name__)


def run_role_node(
    role: str, config_path: str, run_dir: str, address: str, index: int, port: int, weights_key_file: str
) -> None:
    """The body of every launchpad node: run one role; exit non-zero when it fails.

    ``weights_key_file``: path of the run's key (the key itself never goes through launchpad); "" runs the role
    with ``--insecure-weights``.
    """
    from actorq.config import load_config
    from actorq.roles import main as role_main
    from actorq.roles.common import setup_logging
    from actorq.roles.weights_key import load_key_file

    setup_logging()
    needs_key = weights_key_file and role != "replay"
    code = role_main(
        role,
        load_config(config_path),
        run_dir,
        address=None if role == "replay" else address,
        index=index,
        port=port if role == "replay" else None,
        weights_key=load_key_file(weights_key_file) if needs_key else None,
        insecure_weights=not weights_key_file,
    )
    # Like `actorq role`: skip interpreter teardown (Reverb writer destructors can block); exit with the status.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def build_program(
    config: ExperimentConfig, run_dir: Path, config_path: Path, port: int, weights_key_file: Path | None
):
    """The lp.Program: one PyNode per role, grouped by role name (``weights_key_file`` None: insecure)."""
    import launchpad as lp

    address = f"localhost:{port}"
    program = lp.Program("actorq")
    for spec in topology(config):
        with program.group(spec.label):
            program.add_node(
                lp.PyNode(
                    run_role_node,
                    spec.role,
                    str(config_path),
                    str(run_dir),
                    address,
                    spec.index,
                    port,
                    str(weights_key_file or ""),
                )
            )
    return program


class LaunchpadLauncher(LauncherBase):
    """Launches the program with launchpad and watches it like the local launcher does."""

    def _workers(self, manager) -> dict[str, list[psutil.Process]]:
        # launchpad 0.5.0 keeps the processes it started per group here (the version is pinned).
        return {label: list(workers) for label, workers in manager._active_workers.items()}  # noqa: SLF001

    def _dead_groups(self, manager, groups: list[str]) -> list[str]:
        dead = []
        for label in groups:
            workers = manager._active_workers.get(label, [])  # noqa: SLF001
            if not workers or not any(_alive(w) for w in workers):
                dead.append(label)
        return dead

    def _stop(self, groups: dict[str, list[psutil.Process]]) -> None:
        """Stop the learner group first (actors still feed it, so it can finish its step and checkpoint), then
        the rest; each as SIGTERM to the node processes and the wrappers launchpad put around them, then SIGKILL."""
        learner = groups.get("learner", [])
        rest = [p for label, workers in groups.items() if label != "learner" for p in workers]
        for phase in (learner, rest):
            _terminate_trees(phase)

    def run(self) -> int:
        import launchpad as lp
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        program = build_program(self.config, self.run_dir, self.config_path, self.port, self.weights_key_file)
        monitor = RunMonitor(self.config, self.run_dir)
        # Energy: CPU time of the node processes launchpad starts (our descendants) plus codecarbon, as local does.
        with EnergyMeter(self.run_dir) as energy:
            manager = lp.launch(
                program, launch_type=lp.LaunchType.LOCAL_MULTI_PROCESSING, terminal="current_terminal"
            )
            workers = self._workers(manager)
            groups = list(workers)
            monitor.started = time.time()
            reason, failure, last_view = "role_failed", "", 0.0
            try:
                while True:
                    if manager.stop_event().is_set():
                        reason = "interrupted"
                        break
                    dead = self._dead_groups(manager, groups)
                    if dead:
                        reason, failure = "role_failed", f"role process(es) ended: {', '.join(dead)}"
                        break
                    stop = monitor.stop_reason()
                    if stop:
                        reason = stop
                        break
                    # Launchpad interleaves the roles' own output here, so the view is appended, not redrawn.
                    if not self.quiet and time.monotonic() - last_view >= 30.0:
                        last_view = time.monotonic()
                        sys.stdout.write(monitor.progress() + "\n\n")
                    time.sleep(0.5)
            except KeyboardInterrupt:
                reason = "interrupted"
            finally:
                wall = time.time() - monitor.started
                self._stop(workers)
                manager._disable_signals()  # noqa: SLF001  (we stopped the workers ourselves)
        extra = {"launcher": "launchpad", "replay_address": self.address}
        extra["weights_signing"] = self.weights_signing
        extra["energy"] = energy.summary()
        if failure:
            extra["failure"] = failure
        summary = monitor.write_summary(reason, wall_seconds=wall, extra=extra)
        if not self.quiet:
            sys.stdout.write(format_summary(summary) + "\n")
        return EXIT_CODES.get(reason, 1)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _terminate_trees(processes: list[psutil.Process]) -> None:
    """SIGTERM ``processes`` and their descendants, wait up to ROLE_STOP_GRACE_S, then SIGKILL what is left."""
    tree: list[psutil.Process] = []
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            tree += proc.children(recursive=True)
        tree.append(proc)
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(tree, timeout=ROLE_STOP_GRACE_S)
    for proc in alive:
        log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
