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
from actorq.config.shards import join_addresses
from actorq.launchers.topology import RoleSpec
from actorq.status import RoleStatus, read_status
from actorq.weights_key import describe, load_key_file

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
    """Replay shard 0's port (picked before any role starts, unless the placement picks it on the replay's host)."""
    weights_key_file: Path | None
    """The run's weights key file; None runs every role with ``--insecure-weights``."""
    quiet: bool = False
    """No live progress view."""
    shard_ports: tuple[int, ...] = ()
    """Every replay shard's port, in shard order (empty: one shard, on ``port``)."""

    def replay_port(self, shard: int) -> int:
        """The port replay shard ``shard`` serves on."""
        return self.shard_ports[shard] if self.shard_ports else self.port


class Placement(ABC):
    """Runs roles somewhere; the supervisor asks it, role by role (by label), what it needs.

    The protocol, the same for every placement (no capability flags; what differs is in the answers):

    * :meth:`open`, :meth:`start_roles` (default: :meth:`start` each, replay first, :meth:`wait_replay` between),
      :meth:`stop`, :meth:`close`: the lifecycle;
    * :meth:`exit_code`: None while a role runs (or the placement is restarting it), else how it ended;
    * :meth:`restart`: start a dead role again, or say it cannot (False: the death is final); :meth:`restarts`:
      restarts the placement did on its own (Ray), which the supervisor adds to its own;
    * :meth:`status`, :meth:`where`, :meth:`log_path`: a role's record, place and console log (a role without a log
      file prints to this terminal, so the live view is appended, not redrawn);
    * :meth:`roles_cpu_seconds`, :meth:`weights_signing`, :meth:`summary_extra`: what summary.json needs from it.
    """

    name: ClassVar[str] = ""
    """The launcher name (``config.launcher``) this placement implements."""

    def __init__(self, run: RunContext):
        self.run = run

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> None:
        """Acquire what the roles need before any starts (e.g. join or start a Ray cluster)."""
        return None

    def start_roles(self, specs: list[RoleSpec], wait_replay_s: float) -> str:
        """Start ``specs`` in order (replay first); returns the replay address the others were given.

        The default starts every replay shard, waits for each one's status record, then starts the rest one by one
        with every shard's address (:func:`actorq.config.shards.join_addresses`).
        """
        shards = [spec for spec in specs if spec.role == "replay"]
        for spec in shards:
            self.start(spec, address="")
        address = join_addresses([self.wait_replay(spec, wait_replay_s) for spec in shards])
        for spec in specs:
            if spec.role != "replay":
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

    def restart(self, label: str) -> bool:
        """Start a role that ended again, with the same arguments; False when this placement cannot (threads, or a
        role its cluster already gave up on): the role's death then ends the run. Default: cannot."""
        return False

    def restarts(self, label: str) -> int:
        """Restarts the placement did on its own, without :meth:`restart` (Ray's); default 0."""
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

    def roles_cpu_seconds(self, measured: float | None, reported: float) -> float:
        """The run's role CPU seconds for summary.json: ``measured`` (the energy meter's, over this process's
        descendants) when it saw any, else ``reported`` (the sum of the roles' status records). Placements whose
        roles are not this process's descendants (Ray's workers) answer ``reported``."""
        return measured or reported

    def weights_signing(self) -> dict[str, str]:
        """summary.json's ``weights_signing``: the scheme and run id of the key the roles use (never the key). Every
        role is given the run's key file and the key rule takes it first, so on this host that is the file's key;
        placements whose roles read the file on other hosts ask them."""
        key = load_key_file(self.run.weights_key_file) if self.run.weights_key_file else None
        return describe(key)

    def summary_extra(self) -> dict[str, Any]:
        """Placement-specific summary.json fields (addresses, nodes, thread leftovers)."""
        return {}
