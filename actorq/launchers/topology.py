"""Which roles an experiment runs, and the command line that starts each one.

Every launcher (local subprocesses, launchpad, Docker compose, other hosts by hand) starts the same roles through
the same per-role CLI, ``actorq role NAME --config ... --run-dir ... --replay-address HOST:PORT``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from actorq.config import ExperimentConfig
from actorq.status import role_label


@dataclass(frozen=True)
class RoleSpec:
    """One process of the experiment."""

    role: str
    index: int = 0

    @property
    def label(self) -> str:
        return role_label(self.role, self.index)


def topology(config: ExperimentConfig) -> list[RoleSpec]:
    """replay, learner, quantizer, N actors, evaluator: in start order (replay first, it is everyone's server)."""
    roles = [RoleSpec("replay"), RoleSpec("learner"), RoleSpec("quantizer")]
    roles += [RoleSpec("actor", i) for i in range(config.actor.num_actors)]
    roles.append(RoleSpec("evaluator"))
    return roles


def role_command(
    spec: RoleSpec,
    config_path: str | Path,
    run_dir: str | Path,
    address: str,
    port: int,
    python: str | None = None,
    *,
    weights_key_file: str | Path | None,
    parent_pid: int | None = None,
) -> list[str]:
    """The argv that runs ``spec`` through ``actorq role`` with this interpreter.

    ``weights_key_file``: the run's key file, passed to every role that signs or verifies weights; None runs them
    with ``--insecure-weights``. ``parent_pid``: the role stops once that process (the launcher spawning it) is
    gone (``--stop-with-parent``).
    """
    cmd = [python or sys.executable, "-m", "actorq.roles", spec.role, "--config", str(config_path)]
    cmd += ["--run-dir", str(run_dir)]
    if spec.role == "replay":
        cmd += ["--port", str(port)]
    else:
        cmd += ["--replay-address", address]
    if spec.role == "actor":
        cmd += ["--index", str(spec.index)]
    if spec.role != "replay":
        cmd += ["--weights-key-file", str(weights_key_file)] if weights_key_file else ["--insecure-weights"]
    if parent_pid is not None:
        cmd += ["--stop-with-parent", str(parent_pid)]
    return cmd
