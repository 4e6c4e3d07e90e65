"""Where a run's roles execute: the one thing that differs between launchers.

A :class:`Placement` starts a role, tells whether it is alive (or how it ended), restarts it, stops a group of
roles, reads its status record and says where it runs. Everything else about a run (start order, waiting for
replay, health, restarts with backoff, budgets and the target, the learner-first stop, exit codes, the summary) is
:class:`actorq.launchers.supervisor.Supervisor`'s, once for every placement (Sample Factory's runner with serial and
parallel subclasses is the pattern). The placements: ``local`` (subprocesses), ``launchpad``
(LOCAL_MULTI_PROCESSING), ``inprocess`` (threads) and ``ray`` (Ray actors on a cluster).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from actorq.config import ExperimentConfig
from actorq.launchers.topology import RoleSpec
from actorq.status import RoleStatus, read_status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """What every placement needs to start a run's roles."""

    config: ExperimentConfig
    """The resolved, validated config."""
    run_dir: Path
    """The run directory (on the launcher's host)."""
    config_path: Path
    """The resolved config saved in the run directory (roles load it)."""
    port: int
    """The replay port (picked before any role starts, unless the placement picks it on the replay's host)."""
    weights_key_file: Path | None
    """The run's weights key file; None runs every role with ``--insecure-weights``."""
    quiet: bool = False
    """No live progress view."""


class Placement(ABC):
    """Runs roles somewhere; the supervisor asks it, role by role (by label), what it needs.

    Subclasses implement the abstract methods; ``restarts_itself`` placements (Ray) restart dead roles on their own
    and report how often through :meth:`restarts`, the others are restarted by the supervisor through
    :meth:`restart`.
    """

    name: ClassVar[str] = ""
    """The launcher name (``config.launcher``) this placement implements."""
    restarts_itself: ClassVar[bool] = False
    """True when the placement restarts restartable roles itself; :meth:`exit_code` is then final."""
    can_restart: ClassVar[bool] = True
    """False when roles cannot be restarted one by one (launchpad starts one program): a dead role ends the run."""
    roles_report_cpu: ClassVar[bool] = False
    """True when the roles are not this process's descendants (Ray's workers on a cluster): the run's role CPU time is
    then the sum the roles report in their status records, not what the energy meter sees under this process."""
    interleaves_output: ClassVar[bool] = False
    """True when roles print to the launcher's terminal (the live view is then appended, never redrawn)."""

    def __init__(self, run: RunContext):
        self.run = run

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> None:
        """Acquire what the roles need before any starts (e.g. join or start a Ray cluster)."""
        return None

    def start_roles(self, specs: list[RoleSpec], wait_replay_s: float) -> str:
        """Start ``specs`` in order (replay first); returns the replay address the others were given.

        The default starts replay, waits for its status record, then starts the rest one by one.
        """
        address = ""
        for spec in specs:
            if spec.role == "replay":
                self.start(spec, address="")
                address = self.wait_replay(spec, wait_replay_s)
            else:
                self.start(spec, address=address)
        return address

    @abstractmethod
    def start(self, spec: RoleSpec, address: str) -> None:
        """Start one role (without waiting for it); ``address``: replay's HOST:PORT ("" for replay itself)."""

    @abstractmethod
    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        """Wait until the replay role serves; return the HOST:PORT the other roles reach it at.

        Raises:
            RuntimeError: replay ended or did not serve within ``timeout_s`` (the message says where to look).
        """

    @abstractmethod
    def exit_code(self, label: str) -> int | None:
        """None while the role runs (or is being restarted by the placement), else its exit status."""

    def interrupted(self) -> bool:
        """True when the user interrupted the run through the placement (e.g. launchpad's own Ctrl-C handler)."""
        return False

    def restart(self, label: str) -> None:
        """Start a role that ended again, with the same arguments (only when ``can_restart``)."""
        raise NotImplementedError(f"the {self.name} placement cannot restart {label}")

    def restarts(self, label: str) -> int:
        """Restarts the placement did by itself (``restarts_itself``); 0 for the others."""
        return 0

    @abstractmethod
    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        """Ask the roles ``labels`` to stop, wait up to ``grace_s`` for all, force the rest; their exit statuses."""

    def close(self) -> None:
        """Release what :meth:`open` acquired; called once, after every role stopped (also after failures)."""
        return None

    # -- observation -----------------------------------------------------------------------------------------
    def status(self, label: str) -> RoleStatus | None:
        """The role's latest status record (default: its ``status.json`` in the shared run directory)."""
        return read_status(self.run.run_dir / label)

    def where(self, label: str) -> str:
        """Where the role runs, for people (host, node, pid)."""
        record = self.status(label)
        return f"{record.host} pid {record.pid}" if record else "-"

    def log_path(self, label: str) -> Path | None:
        """The role's console log on this host, if it has one."""
        return None

    def summary_extra(self) -> dict[str, Any]:
        """Placement-specific summary.json fields (addresses, nodes, thread leftovers)."""
        return {}
