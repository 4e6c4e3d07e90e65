"""Local launcher: every role as a subprocess of ``actorq role``, owned and stopped by pid.

The launcher starts replay first and waits for it to answer, then the other roles; it restarts crashed replay,
actors, quantizer and evaluator with bounded retries and backoff (a dead learner ends the run: continue it with
``actorq train --resume RUN_DIR``), shows a live progress view, stops everything on completion, Ctrl-C/SIGTERM
or a fatal role death, and writes summary.json.
It signals only the pids it started; it never looks processes up by name.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actorq.config import ExperimentConfig
from actorq.launchers.energy import EnergyMeter
from actorq.launchers.monitor import RunMonitor, format_summary
from actorq.launchers.topology import RoleSpec, role_command, topology
from actorq.roles.common import learner_environment
from actorq.roles.weights_key import describe, ensure_run_key, load_key_file

log = logging.getLogger(__name__)

# Replay restarts on the same port (its argv carries --port) and restores its last Reverb checkpoint; the other roles
# ride it out: Reverb's writers and the learner's dataset reconnect by themselves, actors and quantizer retry.
RESTARTABLE = ("replay", "actor", "quantizer", "evaluator")
MAX_RESTARTS = 5
ROLE_STOP_GRACE_S = 8.0
"""How long a role may take to exit after SIGTERM (flush metrics, final checkpoint) before it is SIGKILLed; the
launchers stop roles in two phases (the learner, then the rest), so a run stops within about twice this."""

EXIT_CODES = {"target": 0, "max_minutes": 0, "max_actor_steps": 0, "role_failed": 1, "interrupted": 130}


@dataclass
class Child:
    """A role process this launcher started."""

    spec: RoleSpec
    argv: list[str]
    log_path: Path
    process: subprocess.Popen | None = None
    restarts: int = 0
    next_restart: float = 0.0
    exits: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


def pick_port() -> int:
    """A free TCP port on this host."""
    import portpicker

    return portpicker.pick_unused_port()


class LauncherBase:
    """What every multi-process launcher holds: the config, its run directory, the replay port/address and the
    run's weights key file (created here for a new run, reused by ``--resume``; none with ``insecure_weights``)."""

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        config_path: str | Path,
        quiet: bool = False,
        insecure_weights: bool = False,
    ):
        self.config = config
        self.run_dir = Path(run_dir)
        self.config_path = Path(config_path)
        self.quiet = quiet
        self.port = config.replay.port or pick_port()
        self.address = f"localhost:{self.port}"
        self.weights_key_file = None if insecure_weights else ensure_run_key(self.run_dir)
        key = load_key_file(self.weights_key_file) if self.weights_key_file else None
        self.weights_signing = describe(key)  # scheme and run id, never the key: for summary.json
        if insecure_weights:
            log.warning(
                "--insecure-weights: weight messages are unsigned; actors accept whatever replay holds"
            )


class LocalLauncher(LauncherBase):
    """Runs one experiment as local subprocesses; ``run()`` returns the exit status."""

    def __init__(self, *args: Any, **kwargs: Any):
        """Takes :class:`LauncherBase`'s arguments."""
        super().__init__(*args, **kwargs)
        self.children: list[Child] = []
        self._interrupted = False
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)

    # -- processes -------------------------------------------------------------------------------------------
    def _spawn(self, child: Child) -> None:
        with child.log_path.open("ab") as out:
            # A new session: terminal Ctrl-C reaches only the launcher, which then stops roles in order.
            env = _child_env()
            if (
                child.spec.role == "learner"
            ):  # read by TensorFlow when it loads, so set before the process starts
                env.update(learner_environment(self.config))
            child.process = subprocess.Popen(
                child.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        log.debug("started %s pid %d", child.spec.label, child.pid)

    def start(self) -> None:
        for spec in topology(self.config):
            argv = role_command(
                spec,
                self.config_path,
                self.run_dir,
                self.address,
                self.port,
                weights_key_file=self.weights_key_file,
            )
            child = Child(spec, argv, self.run_dir / "logs" / f"{spec.label}.log")
            self.children.append(child)
            self._spawn(child)
            if spec.role == "replay":
                self._wait_for_replay(child)

    def _wait_for_replay(self, child: Child, timeout_s: float = 120.0) -> None:
        port_file = self.run_dir / "replay" / "port"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if child.process.poll() is not None:
                raise RuntimeError(
                    f"replay server exited with {child.process.returncode}; see {child.log_path}"
                )
            if port_file.exists() and port_file.read_text().strip() == str(self.port):
                return
            time.sleep(0.2)
        raise RuntimeError(f"replay server did not start within {timeout_s:.0f}s; see {child.log_path}")

    def _check_children(self, monitor: RunMonitor) -> str | None:
        """Restart restartable roles that died; return 'role_failed' when a fatal one died or retries ran out."""
        now = time.monotonic()
        for child in self.children:
            proc = child.process
            if proc is None or proc.poll() is None:
                continue
            code = proc.returncode
            if child.next_restart == 0.0:
                child.exits.append(code)
                log.warning("%s (pid %d) exited with %d", child.spec.label, proc.pid, code)
                if child.spec.role not in RESTARTABLE or child.restarts >= MAX_RESTARTS:
                    self.failed = f"{child.spec.label} exited with {code} (see {child.log_path})"
                    return "role_failed"
                child.next_restart = now + min(2.0**child.restarts, 30.0)
            elif now >= child.next_restart:
                child.restarts += 1
                child.next_restart = 0.0
                monitor.restarts[child.spec.label] = child.restarts
                log.warning("restarting %s (restart %d/%d)", child.spec.label, child.restarts, MAX_RESTARTS)
                self._spawn(child)
        return None

    def stop(self) -> dict[str, int | None]:
        """Stop the learner first, then every other live child; SIGKILL stragglers; returns exit codes.

        The learner goes first, while actors still feed replay: a learner whose sample waits on the rate limiter
        would otherwise stay blocked once the actors are gone and exit without its final checkpoint.
        """
        learner = [c for c in self.children if c.spec.role == "learner"]
        rest = sorted(
            (c for c in self.children if c.spec.role != "learner"), key=lambda c: c.spec.role == "replay"
        )
        for phase in (learner, rest):
            self._stop_children(phase)
        return {c.spec.label: (c.process.returncode if c.process else None) for c in self.children}

    @staticmethod
    def _stop_children(children: list[Child]) -> None:
        """SIGTERM each live child of ``children``, wait up to ROLE_STOP_GRACE_S for all of them, SIGKILL the rest."""
        for child in children:
            if child.process and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + ROLE_STOP_GRACE_S
        for child in children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM; killing it", child.spec.label, child.pid)
                child.process.kill()
                child.process.wait(timeout=5)

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> int:
        self.failed = ""
        monitor = RunMonitor(self.config, self.run_dir)
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def interrupt(signum, _frame):
            self._interrupted = True

        for sig in previous:
            signal.signal(sig, interrupt)
        reason = "role_failed"
        # Energy: CPU time of every role (sampled, and exact once reaped) plus codecarbon, into summary.json.
        with EnergyMeter(self.run_dir) as energy:
            try:
                self.start()
                monitor.started = time.time()
                last_view = 0.0
                while True:
                    if self._interrupted:
                        reason = "interrupted"
                        break
                    fatal = self._check_children(monitor)
                    if fatal:
                        reason = fatal
                        break
                    stop = monitor.stop_reason()
                    if stop:
                        reason = stop
                        break
                    if not self.quiet and time.monotonic() - last_view >= (2.0 if _tty() else 30.0):
                        last_view = time.monotonic()
                        show_progress(monitor)
                    time.sleep(0.5)
            except RuntimeError as exc:
                self.failed = str(exc)
                reason = "role_failed"
            finally:
                wall = time.time() - monitor.started
                codes = self.stop()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        extra = {"launcher": "local", "role_exit_codes": codes, "replay_address": self.address}
        extra["weights_signing"] = self.weights_signing
        extra["energy"] = energy.summary()
        if self.failed:
            extra["failure"] = self.failed
        summary = monitor.write_summary(reason, wall_seconds=wall, extra=extra)
        if not self.quiet:
            sys.stdout.write(
                monitor.progress() + "\n\nsummary (" + str(self.run_dir / "summary.json") + ")\n"
            )
            sys.stdout.write(format_summary(summary) + "\n")
        if self.failed:
            log.error("run failed: %s", self.failed)
        return EXIT_CODES.get(reason, 1)


def _tty() -> bool:
    return sys.stdout.isatty()


def show_progress(monitor: RunMonitor) -> None:
    """Redraw the one-screen view in place on a terminal; append it every 30 s when output is a file."""
    text = monitor.progress()
    sys.stdout.write(("\x1b[H\x1b[2J" + text + "\n") if _tty() else (text + "\n\n"))
    sys.stdout.flush()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Each role is one process on a small machine: keep math libraries from spawning a thread per core each.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env
