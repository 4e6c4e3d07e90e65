"""The run supervisor: one owner of a run's lifecycle, whatever the placement.

It starts the roles in order (replay first, and waits until it serves), watches their health (restarting the
restartable ones with bounded retries and backoff, unless the placement restarts them itself), their budgets and
the target (from the roles' status records), stops the learner first (while actors still feed replay, so it
finishes its step and checkpoints), then the other roles, replay last, collects exit codes and restarts, and writes
summary.json. Placements (:mod:`actorq.launchers.placement`) implement only what differs: start a role, is it
alive, stop it, restart it, read its record.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actorq.config import ExperimentConfig
from actorq.config.shards import shard_port
from actorq.errors import ExitCode
from actorq.launchers.energy import EnergyMeter
from actorq.launchers.monitor import RunMonitor
from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.summary_text import human_summary
from actorq.launchers.topology import RoleSpec, topology
from actorq.weights_key import run_key_file

log = logging.getLogger(__name__)

RESTARTABLE = ("replay", "actor", "quantizer", "evaluator")
"""Roles restarted when they die. Replay restarts on the same port and restores its last Reverb checkpoint; the
others ride it out (Reverb's writers and the learner's dataset reconnect). A dead learner ends the run: continue it
with ``actorq train --resume RUN_DIR``."""
MAX_RESTARTS = 5
"""Restarts per role before its death ends the run."""
ROLE_STOP_GRACE_S = 8.0
"""How long a role may take to exit after it is asked to stop (flush metrics, final checkpoint) before it is forced.
Roles stop in three phases (the learner, then actors, quantizer and evaluator, then replay), and each placement
waits per phase: local this long, then SIGKILL (a run stops within ~24 s); launchpad this plus 5 s to reap the
killed (~39 s); Ray this plus 2 s, then ``ray.kill`` (~30 s, plus the shutdown of a cluster the run started);
in-process, whose threads cannot be killed, ``JOIN_TIMEOUT_S`` = 30 s (90 s). Those are the worst cases: a run
usually stops within a few seconds (measured per placement in README's "Stopping")."""
REPLAY_START_S = 120.0
"""How long replay may take to serve (TensorFlow's import, a checkpoint to restore) before the run fails."""

EXIT_CODES = {
    "target": 0,
    "max_minutes": 0,
    "max_actor_steps": 0,
    "max_learner_steps": 0,
    "role_failed": 1,
    "interrupted": ExitCode.INTERRUPTED,
}
"""The process exit status for each stop reason."""


def run_context(
    config: ExperimentConfig,
    run_dir: str | Path,
    config_path: str | Path,
    *,
    quiet: bool = False,
    insecure_weights: bool = False,
    weights_key_file: str | Path | None = None,
) -> RunContext:
    """The run's context: its replay port and weights key file, by the one key rule
    (:func:`actorq.weights_key.run_key_file`: ``weights_key_file``, else ``$ACTORQ_WEIGHTS_KEY_FILE``, else
    ``RUN_DIR/secrets/weights.key``, created for a new run and reused by ``--resume``; none with
    ``insecure_weights``). Every role is then given that file."""
    import portpicker

    run_dir = Path(run_dir)
    if insecure_weights:
        key_file = None
        log.warning("--insecure-weights: weight messages are unsigned; actors accept whatever replay holds")
    else:
        key_file = run_key_file(
            run_dir, weights_key_file
        )  # a bad key file is an error now, before any role starts
    ports = tuple(
        shard_port(config.replay.port, shard) or portpicker.pick_unused_port()
        for shard in range(config.replay.shards)
    )
    return RunContext(
        config=config,
        run_dir=run_dir,
        config_path=Path(config_path),
        port=ports[0],
        shard_ports=ports,
        weights_key_file=key_file,
        quiet=quiet,
    )


@dataclass
class _Health:
    """The supervisor's bookkeeping for one role."""

    spec: RoleSpec
    restarts: int = 0
    """Restarts this supervisor made (through ``Placement.restart``)."""
    placement_restarts: int = 0
    """Restarts the placement made on its own (``Placement.restarts``, read at every health check)."""
    restart_at: float | None = None
    exits: list[int] = field(default_factory=list)


class Supervisor:
    """Runs one experiment on a placement; :meth:`run` returns the exit status (0, 1, 130; see EXIT_CODES)."""

    def __init__(self, placement: Placement, poll_s: float = 0.5):
        self.placement = placement
        self.run_ctx = placement.run
        self.poll_s = poll_s
        self.specs = topology(self.run_ctx.config)
        self.health = {spec.label: _Health(spec) for spec in self.specs}
        self.monitor = RunMonitor(
            self.run_ctx.config,
            self.run_ctx.run_dir,
            placement.status,
            [s.label for s in self.specs],
            restarts=self.restart_counts,
        )
        self.address = ""
        self.failure = ""
        self._interrupted = threading.Event()

    # -- health ----------------------------------------------------------------------------------------------
    def restarts(self, label: str) -> int:
        """How often ``label`` was restarted: by this supervisor, or by the placement on its own (Ray)."""
        health = self.health[label]
        return health.restarts + health.placement_restarts

    def restart_counts(self) -> dict[str, int]:
        """Restarts of each role restarted at least once (summary.json's ``restarts``)."""
        return {label: n for label in self.health if (n := self.restarts(label))}

    def _check_roles(self) -> str | None:
        """Restart restartable roles that died (after a backoff, through :meth:`Placement.restart`); 'role_failed'
        when a fatal one died, its restarts ran out or the placement cannot restart it; 'max_learner_steps' when
        the learner ended cleanly on its step budget."""
        now = time.monotonic()
        for label, health in self.health.items():
            # Read while the run goes on: the placement may not answer once it is closed (Ray's table).
            health.placement_restarts = self.placement.restarts(label)
            code = self.placement.exit_code(label)
            if code is None:
                continue
            if health.restart_at is None:
                health.exits.append(code)
                if code == 0 and health.spec.role == "learner" and self.run_ctx.config.learner.max_steps:
                    # The learner's own budget (learner.max_steps) is the only way it ends by itself with 0.
                    log.info(
                        "%s made its %d steps (learner.max_steps)",
                        label,
                        self.run_ctx.config.learner.max_steps,
                    )
                    return "max_learner_steps"
                log.warning("%s exited with %s", label, code)
                if health.spec.role not in RESTARTABLE or self.restarts(label) >= MAX_RESTARTS:
                    return self._failed(label, code)
                health.restart_at = now + min(2.0**health.restarts, 30.0)
            elif now >= health.restart_at:
                health.restart_at = None
                if not self.placement.restart(label):
                    return self._failed(label, code)
                health.restarts += 1
                log.warning("restarted %s (restart %d/%d)", label, self.restarts(label), MAX_RESTARTS)
        return None

    def _failed(self, label: str, code: int) -> str:
        where = self.placement.log_path(label) or self.placement.where(label)
        self.failure = f"{label} exited with {code} (see {where})"
        return "role_failed"

    # -- stopping --------------------------------------------------------------------------------------------
    def stop(self) -> dict[str, int | None]:
        """The learner first, while actors still feed replay (a learner whose sample waits on the rate limiter
        would otherwise stay blocked and exit without its final checkpoint); then the others; replay last, so the
        others can flush. Returns every role's exit status."""
        by_role = [
            [s.label for s in self.specs if s.role == "learner"],
            [s.label for s in self.specs if s.role not in ("learner", "replay")],
            [s.label for s in self.specs if s.role == "replay"],
        ]
        codes: dict[str, int | None] = {}
        for phase in by_role:
            if phase:
                codes.update(self.placement.stop(phase, ROLE_STOP_GRACE_S))
        return {s.label: codes.get(s.label) for s in self.specs}

    # -- the run ---------------------------------------------------------------------------------------------
    def _loop(self) -> str:
        last_view = 0.0
        ctx = self.run_ctx
        # Redraw the screen only when no role prints to this terminal (each has its own console log).
        redraw = sys.stdout.isatty() and all(self.placement.log_path(s.label) for s in self.specs)
        while True:
            if self._interrupted.is_set():
                return "interrupted"
            fatal = self._check_roles()
            if fatal:
                return fatal
            stop = self.monitor.stop_reason()
            if stop:
                return stop
            if not ctx.quiet and time.monotonic() - last_view >= (2.0 if redraw else 30.0):
                last_view = time.monotonic()
                text = self.monitor.progress()
                sys.stdout.write(("\x1b[H\x1b[2J" + text + "\n") if redraw else (text + "\n\n"))
                sys.stdout.flush()
            self._interrupted.wait(self.poll_s)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        log.warning("%s: stopping the run (learner first)", signal.Signals(signum).name)
        self._interrupted.set()

    def run(self) -> int:
        """Start, watch, stop; write summary.json; return the exit status."""
        previous = {}
        if threading.current_thread() is threading.main_thread():  # Python signals reach only the main thread
            previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            for sig in previous:
                signal.signal(sig, self._on_signal)
        reason, codes, where = "role_failed", {}, {}
        # Energy: CPU time of every role that is our descendant (sampled, exact once reaped) plus codecarbon.
        with EnergyMeter(self.run_ctx.run_dir) as energy:
            try:
                self.placement.open()
                self.address = self.placement.start_roles(self.specs, REPLAY_START_S)
                self.monitor.start()
                reason = self._loop()
            except KeyboardInterrupt:
                reason = "interrupted"
            except Exception as exc:  # a role that could not start, a cluster that cannot be reached
                log.exception("the run could not start or watch its roles")
                self.failure = f"{type(exc).__name__}: {exc}"
                reason = "role_failed"
            finally:
                wall = time.time() - self.monitor.started
                try:
                    codes = self.stop()
                    where = {s.label: self.placement.where(s.label) for s in self.specs}
                finally:
                    self.placement.close()
                    for sig, handler in previous.items():
                        signal.signal(sig, handler)
        return self._finish(reason, wall, codes, where, energy)

    def _finish(self, reason: str, wall: float, codes: dict, where: dict, energy: EnergyMeter) -> int:
        extra: dict[str, Any] = {
            "launcher": self.placement.name,
            "role_exit_codes": codes,
            "role_placement": where,
            "replay_address": self.address,
            "weights_signing": self.placement.weights_signing(),
        }
        energy_summary = energy.summary()
        energy_summary["roles_cpu_seconds"] = round(
            self.placement.roles_cpu_seconds(
                energy_summary.get("roles_cpu_seconds"), self.monitor.roles_cpu_seconds()
            ),
            3,
        )
        extra["energy"] = energy_summary
        extra.update(self.placement.summary_extra())
        if self.failure:
            extra["failure"] = self.failure
        summary = self.monitor.write_summary(reason, wall_seconds=wall, extra=extra)
        if not self.run_ctx.quiet:
            path = self.run_ctx.run_dir / "summary.json"
            sys.stdout.write(f"{self.monitor.progress()}\n\n{human_summary(summary, path)}\n")
        if self.failure:
            log.error("run failed: %s", self.failure)
        return EXIT_CODES.get(summary["exit"], 1)
