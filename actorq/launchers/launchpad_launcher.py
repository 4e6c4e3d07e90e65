"""Launchpad launcher: each role a PyNode of its own ``lp.Program``, LOCAL_MULTI_PROCESSING, output in the current
terminal (each node's lines prefixed and coloured by launchpad).

The placement implements the base API role by role: :meth:`LaunchpadPlacement.start` launches a one-node program
for the role (so the supervisor starts replay first and waits for it, as everywhere, and can restart a dead role by
launching it again). Nodes carry only strings and ints (role name, config path, run dir, address, key file path), so
what launchpad serialises for its subprocesses is a reference to :func:`run_role_node` plus plain values, never data
from the network. Launchpad's signal handlers come off as soon as a program is launched: Ctrl-C and SIGTERM reach
the supervisor, which stops the roles in order (the learner first) by signalling the processes launchpad started
for each program (by the pids its worker manager recorded), then SIGKILLs what is left after a grace period.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time

import psutil

from actorq.errors import ExitCode
from actorq.launchers.launchpad_adapter import active_workers, check_surface, disable_signals
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.topology import RoleSpec
from actorq.status import ReplayStatus
from actorq.usage import setup_logging

log = logging.getLogger(__name__)


def run_role_node(
    role: str, config_path: str, run_dir: str, address: str, index: int, port: int, weights_key_file: str
) -> None:
    """The body of every launchpad node: run one role (:func:`actorq.roles.main`); exit with its status.

    ``weights_key_file``: path of the run's key (the key itself never goes through launchpad); "" runs the role
    with ``--insecure-weights``.
    """
    from actorq.config import load_config
    from actorq.roles import main as role_main
    from actorq.weights_key import WeightsKeyError

    setup_logging()
    try:
        code = role_main(
            role,
            load_config(config_path),
            run_dir,
            address=None if role == "replay" else address,
            index=index,
            port=port if role == "replay" else None,
            key_file=weights_key_file or None,
            insecure_weights=not weights_key_file,
        )
    except WeightsKeyError as exc:  # as `actorq role` reports it
        log.error("%s", exc)
        code = ExitCode.USAGE
    # Like `actorq role`: skip interpreter teardown (Reverb writer destructors can block); exit with the status.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def build_program(run: RunContext, spec: RoleSpec, address: str):
    """The lp.Program of one role: one PyNode in a group named by the role's label."""
    import launchpad as lp

    program = lp.Program(f"actorq-{spec.label}")
    with program.group(spec.label):
        program.add_node(
            lp.PyNode(
                run_role_node,
                spec.role,
                str(run.config_path),
                str(run.run_dir),
                address or f"localhost:{run.port}",
                spec.index,
                run.port,
                str(run.weights_key_file or ""),
            )
        )
    return program


class LaunchpadPlacement(Placement):
    """Each role a one-node launchpad program; restarted by launching it again."""

    name = "launchpad"

    def __init__(self, run: RunContext):
        super().__init__(run)
        self._workers: dict[str, list[psutil.Process]] = {}
        self._specs: dict[str, tuple[RoleSpec, str]] = {}  # label: (spec, replay address) as started
        self._launched: dict[str, float] = {}

    def open(self) -> None:
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        check_surface()  # a Launchpad without the private members we use fails before it starts anything

    def start(self, spec: RoleSpec, address: str) -> None:
        import launchpad as lp

        self._specs[spec.label] = (spec, address)
        self._launched[spec.label] = time.time()
        manager = lp.launch(
            build_program(self.run, spec, address),
            launch_type=lp.LaunchType.LOCAL_MULTI_PROCESSING,
            terminal="current_terminal",
        )
        # Signals are the supervisor's (it stops the roles in order); launchpad's handlers would stop them at once.
        disable_signals(manager)
        self._workers[spec.label] = workers_by_label(active_workers(manager), [spec.label])[spec.label]

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        """Wait for the status record of the replay node just launched (its port, written since the launch)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.exit_code(spec.label)
            if code is not None:
                raise RuntimeError(f"replay server exited with {code}; see the launcher's output above")
            record = self.status(spec.label)
            if (
                isinstance(record, ReplayStatus)
                and record.port == self.run.port
                and record.started >= self._launched[spec.label] - 1.0
            ):
                return f"localhost:{self.run.port}"
            time.sleep(0.2)
        raise RuntimeError(f"replay server did not start within {timeout_s:.0f}s; see the launcher's output")

    def exit_code(self, label: str) -> int | None:
        workers = self._workers.get(label, [])
        if workers and any(_alive(w) for w in workers):
            return None
        return _exit_status(workers)

    def restart(self, label: str) -> bool:
        """Launch the role's program again, with the same arguments."""
        self.start(*self._specs[label])
        return True

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        """SIGTERM the node processes of ``labels`` and the wrappers launchpad put around them, then SIGKILL."""
        procs = [p for label in labels for p in self._workers.get(label, [])]
        _terminate_trees(procs, grace_s)
        return {label: _exit_status(self._workers.get(label, [])) for label in labels}

    def where(self, label: str) -> str:
        workers = self._workers.get(label, [])
        return f"localhost pid {workers[0].pid}" if workers else "-"


def workers_by_label(groups: dict[str, list], labels: list[str]) -> dict[str, list]:
    """Launchpad names each process ``<group><sep><worker index>`` (e.g. ``learner/0``); map them to role labels."""
    out: dict[str, list] = {label: [] for label in labels}
    for name, workers in groups.items():
        for label in labels:
            if name == label or re.fullmatch(rf"{re.escape(label)}[_/]\d+", name):
                out[label] += workers
                break
        else:
            log.warning("launchpad process group %r matches no role", name)
    missing = [label for label, workers in out.items() if not workers]
    if missing:
        raise RuntimeError(
            f"launchpad started no process for {', '.join(missing)} (groups: {sorted(groups)})"
        )
    return out


def _exit_status(workers: list[psutil.Process]) -> int | None:
    """An ended node's status when we reaped it; 1 when launchpad's wrapper reaped it (status unknown)."""
    for proc in workers:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            code = proc.wait(timeout=0)
            if code is not None:
                return code
    return 1 if workers else None


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _terminate_trees(processes: list[psutil.Process], grace_s: float) -> None:
    """SIGTERM ``processes`` and their descendants, wait up to ``grace_s``, then SIGKILL what is left."""
    tree: list[psutil.Process] = []
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            tree += proc.children(recursive=True)
        tree.append(proc)
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for proc in alive:
        log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
