"""In-process placement: every role as a thread of one process (Sample Factory's serial mode, for debugging and
integration tests). Same roles, same Reverb tables, same status records and metrics files as the multi-process
placements, driven by the same :class:`~actorq.launchers.supervisor.Supervisor`.

Threads cannot be killed: a stop sets the role's stop event and waits for its thread (at least
:data:`JOIN_TIMEOUT_S`); a role that raised counts as exited with status 1, and its error goes into summary.json
(``errors``), with the order roles ended (``role_end_order``) and any thread still alive after the stop.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from actorq.config import ExperimentConfig, save_config
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.topology import RoleSpec
from actorq.roles import build_role
from actorq.roles.weights_key import load_key_file

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 30.0
"""How long a stop waits for a role's thread at least (a learner's final checkpoint can take a while here)."""


@dataclass
class _Thread:
    """A role running on a thread of this process."""

    instance: object
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    code: int | None = None


class InProcessPlacement(Placement):
    """Roles as threads; a role that fails ends the run (threads are not restarted)."""

    name = "inprocess"
    can_restart = False

    def __init__(self, run: RunContext):
        super().__init__(run)
        key = load_key_file(run.weights_key_file) if run.weights_key_file else None
        self._keyed = {"weights_key": key, "insecure_weights": run.weights_key_file is None}
        pinned = {k: v for k, v in vars(run.config.affinity).items() if v}
        if pinned:
            log.warning("in-process launcher: roles share one process, so affinity %s is ignored", pinned)
        self.roles: dict[str, _Thread] = {}
        self.errors: list[str] = []
        self.ended: list[str] = []  # role labels in the order their threads returned

    def start(self, spec: RoleSpec, address: str) -> None:
        run = self.run
        if spec.role == "replay":
            instance = build_role("replay", run.config, run.run_dir, port=run.port)
        else:
            instance = build_role(
                spec.role, run.config, run.run_dir, address=address, index=spec.index, **self._keyed
            )
        role = self.roles[spec.label] = _Thread(instance)
        role.thread = threading.Thread(
            target=self._body, args=(spec.label, role), name=spec.label, daemon=True
        )
        role.thread.start()

    def _body(self, label: str, role: _Thread) -> None:
        try:
            role.instance.run(role.stop)
            role.code = 0
        except Exception as exc:  # a failed role ends the run, with its error in the summary
            log.exception("%s failed", label)
            self.errors.append(f"{label}: {type(exc).__name__}: {exc}")
            role.code = 1
        finally:
            if label != "replay":
                self.ended.append(label)

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        # The replay role serves once constructed (start built it in this thread).
        return f"localhost:{self.roles[spec.label].instance.port}"

    def exit_code(self, label: str) -> int | None:
        role = self.roles.get(label)
        return None if role is None or role.thread.is_alive() else role.code

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        roles = [(label, self.roles[label]) for label in labels if label in self.roles]
        for _, role in roles:
            role.stop.set()
        for label, role in roles:
            role.thread.join(timeout=max(grace_s, JOIN_TIMEOUT_S))
            if role.thread.is_alive():
                log.warning("%s thread still running after its stop", label)
        return {label: role.code for label, role in roles}

    def where(self, label: str) -> str:
        return f"thread {label}" if label in self.roles else "-"

    def summary_extra(self) -> dict:
        alive = [label for label, role in self.roles.items() if role.thread.is_alive()]
        return {
            "errors": list(self.errors),
            "threads_alive_after_stop": alive,
            "role_end_order": list(self.ended),
        }


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
    from actorq.launchers.supervisor import Supervisor, run_context

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        save_config(config, config_path)
    ctx = run_context(config, run_dir, config_path, quiet=quiet, insecure_weights=insecure_weights)
    return Supervisor(InProcessPlacement(ctx), poll_s=poll_s).run()
