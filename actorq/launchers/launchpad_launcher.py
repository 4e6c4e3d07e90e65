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
import re
import sys
from pathlib import Path

import psutil

from actorq.config import ExperimentConfig
from actorq.launchers.launchpad_adapter import active_workers, check_surface, disable_signals
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.topology import RoleSpec, topology

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


class LaunchpadPlacement(Placement):
    """The roles as one launchpad program; a dead role ends the run (launchpad cannot restart one node)."""

    name = "launchpad"
    can_restart = False
    interleaves_output = True

    def __init__(self, run: RunContext):
        super().__init__(run)
        self._manager = None
        self._workers: dict[str, list[psutil.Process]] = {}

    def start_roles(self, specs: list[RoleSpec], wait_replay_s: float) -> str:
        """Launch every role at once (launchpad starts a whole program); the port was picked beforehand."""
        import launchpad as lp
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        check_surface()  # a Launchpad without the private members we use fails before it starts anything
        run = self.run
        program = build_program(run.config, run.run_dir, run.config_path, run.port, run.weights_key_file)
        self._manager = lp.launch(
            program, launch_type=lp.LaunchType.LOCAL_MULTI_PROCESSING, terminal="current_terminal"
        )
        self._workers = workers_by_label(active_workers(self._manager), [s.label for s in specs])
        return f"localhost:{run.port}"

    def start(self, spec: RoleSpec, address: str) -> None:
        raise NotImplementedError("launchpad starts the whole program in start_roles")

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        return f"localhost:{self.run.port}"

    def interrupted(self) -> bool:
        """Launchpad's own Ctrl-C handler fired (it owns the terminal's SIGINT while the program runs)."""
        return self._manager is not None and self._manager.stop_event().is_set()

    def exit_code(self, label: str) -> int | None:
        workers = self._workers.get(label, [])
        if workers and any(_alive(w) for w in workers):
            return None
        return _exit_status(workers)

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        """SIGTERM the node processes of ``labels`` and the wrappers launchpad put around them, then SIGKILL."""
        procs = [p for label in labels for p in self._workers.get(label, [])]
        _terminate_trees(procs, grace_s)
        return {label: _exit_status(self._workers.get(label, [])) for label in labels}

    def close(self) -> None:
        if self._manager is not None:
            disable_signals(self._manager)  # we stopped the workers ourselves

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
