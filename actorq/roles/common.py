"""What every role process shares: its run-directory layout, stop signal, CPUs, environment and periodic metrics."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from actorq.config import ExperimentConfig
from actorq.metrics import MetricsWriter
from actorq.quantize.signing import WeightsKey
from actorq.roles.health import heartbeat
from actorq.status import RoleStatus, write_status
from actorq.usage import CHILD_ENV

if TYPE_CHECKING:  # importing replay loads Reverb and TensorFlow: not before a role has set their environment
    import numpy as np

    from actorq.replay.run_state import RunStateStore, Schema

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3

STOP_DEADLINE_S = 6.0
"""After a stop signal a role has this long to finish; then it dumps its stacks to its log and exits (status 1).
Shorter than the launchers' grace period, so a role ends itself, with a traceback, before it is SIGKILLed."""


def role_dir(run_dir: str | Path, role: str, index: int | None = None) -> Path:
    """``RUN_DIR/<role>`` or ``RUN_DIR/<role>_<index>`` (created)."""
    path = Path(run_dir) / (role if index is None else f"{role}_{index}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` so the role finishes its step, flushes metrics and exits 0."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, _frame):
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()
        # A native call that holds the GIL (a Reverb write waiting on its rate limiter, a TF save) would keep the
        # Python-level shutdown from ever running; faulthandler's watchdog is a C thread that needs no GIL.
        faulthandler.dump_traceback_later(STOP_DEADLINE_S, exit=True)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


_exit_watch: threading.Thread | None = None
"""The thread :func:`exit_after_stop_signal` started in this process, if any."""


def exit_after_stop_signal(deadline_s: float) -> threading.Thread | None:
    """Once SIGTERM or SIGINT arrives, exit ``deadline_s`` later (status 1, every thread's stack dumped to stderr)
    unless the process has ended by then, even when its main thread never returns to Python.

    A Python signal handler runs only when the main thread executes bytecode: a main thread blocked in a native
    wait (an import-lock deadlock, a native call that never returns) never runs it, and a handler that only sets
    a flag (the supervisor's) is not acted on while the run is still starting. The C-level handler still writes
    the signal's number to the wakeup fd, so a daemon thread reading it arms faulthandler's watchdog (a C thread
    that needs no GIL). Signals with Python handlers only: SIGINT by default, SIGTERM once the supervisor's is
    in (before that, SIGTERM's default action ends the process at once). Call it from the main thread of a
    process that is not shared with others (``actorq train``; not a test process running a launcher in-process).

    Returns:
        The watching (daemon) thread, or None when not called from the main thread (nothing is armed).
    """
    global _exit_watch
    if threading.current_thread() is not threading.main_thread():
        log.warning("exit_after_stop_signal: not the main thread; no exit deadline armed")
        return None
    if _exit_watch is not None and _exit_watch.is_alive():
        return _exit_watch  # armed once per process: a second call (a CLI run in-process again) would leak a pipe
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # the C handler must never block
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    stops = {int(signal.SIGTERM), int(signal.SIGINT)}

    def watch() -> None:
        got: set[int] = set()
        while not got:
            data = os.read(read_fd, 64)
            if not data:  # the pipe closed: nothing can arrive any more
                return
            got = stops & set(data)
        name = signal.Signals(min(got)).name
        log.warning("%s: this process exits in %.0f s if it has not ended by then", name, deadline_s)
        faulthandler.dump_traceback_later(deadline_s, exit=True)

    _exit_watch = threading.Thread(target=watch, name="exit-after-stop-signal", daemon=True)
    _exit_watch.start()
    return _exit_watch


PARENT_POLL_S = 1.0
"""How often a role started with a parent to stop with checks that its parent is still there."""


def stop_with_parent(
    parent_pid: int, poll_s: float = PARENT_POLL_S, parent: str = "launcher", this: str = "role"
) -> threading.Thread:
    """Send this process SIGTERM once ``parent_pid`` is no longer its parent, i.e. the launcher that started it
    is gone, however it ended (even ``kill -9``, which gives it no chance to stop its roles).

    Roles run in their own sessions (so a terminal's Ctrl-C reaches only the launcher), which also means nothing
    else ends them when the launcher dies. SIGTERM rather than a direct stop, so this takes the path every other
    stop takes: :func:`install_stop_handlers` (install it first), metrics flushed, the exit deadline armed. Polled
    with :func:`os.getppid` rather than Linux's ``PR_SET_PDEATHSIG``, which fires when the thread that forked the
    process exits, not the process, and does not exist elsewhere.

    Args:
        parent_pid: The pid of the process that started this one.
        poll_s: Seconds between checks.
        parent: What the parent is, for the log line ("launcher", or "parent process" for a train run).
        this: What this process is, for the log line ("role", or "run").

    Returns:
        The watching (daemon) thread, already started.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        log.warning("the %s (pid %d) that started this %s is gone: stopping", parent, parent_pid, this)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name=f"stop-with-parent-{parent_pid}", daemon=True)
    thread.start()
    return thread


ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
"""TensorFlow reads this once, when it loads: oneDNN's CPU kernels on (1) or off (0)."""


def learner_environment(config: ExperimentConfig) -> dict[str, str]:
    """Environment variables the learner's process needs before TensorFlow loads (``learner.onednn``)."""
    return {ONEDNN_ENV: "1" if config.learner.onednn else "0"}


def apply_learner_environment(config: ExperimentConfig) -> None:
    """Set :func:`learner_environment` in this process; warn when TensorFlow is already loaded (too late)."""
    import sys

    wanted = learner_environment(config)
    stale = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    os.environ.update(wanted)
    if stale and "tensorflow" in sys.modules:
        log.warning(
            "TensorFlow was loaded before the learner's settings %s: they do not apply in this process "
            "(start the learner in its own process, e.g. the local launcher or `actorq role learner`)",
            stale,
        )


class AffinityError(RuntimeError):
    """A role was given CPU cores (``affinity.<role>``) that this host does not let it use."""


def pin_role_cpus(config: ExperimentConfig, role: str) -> tuple[int, ...]:
    """Restrict this process to ``affinity.<role>``'s cores (before TF/torch size their thread pools); returns them.

    Raises:
        AffinityError: A core that this host does not have (or does not allow this process).
    """
    cpus = tuple(getattr(config.affinity, role, ()))
    if not cpus:
        return ()
    allowed = sorted(os.sched_getaffinity(0))
    missing = sorted(set(cpus) - set(allowed))
    if missing:
        raise AffinityError(
            f"affinity.{role}={list(cpus)}: CPU(s) {missing} are not available on this host (it allows "
            f"{allowed}); set affinity.{role} to some of those, or [] for any core"
        )
    os.sched_setaffinity(0, cpus)
    log.info("%s pinned to CPU(s) %s", role, list(cpus))
    return cpus


def quiet_tensorflow() -> None:
    """Silence TF's C++ start-up chatter before it is imported (roles import reverb, which imports TF)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", CHILD_ENV["TF_CPP_MIN_LOG_LEVEL"])


class Periodic:
    """True once every ``period_s`` seconds (first call returns True after one period)."""

    def __init__(self, period_s: float):
        self.period_s = period_s
        self._next = time.monotonic() + period_s

    def due(self) -> bool:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.period_s
            return True
        return False


class RoleBase:
    """A role: ``step()`` does one unit of work, ``run(stop)`` loops until ``stop`` is set."""

    name = "role"
    own_process = False
    """True when this role is alone in its process (set by :class:`actorq.roles.host.RoleHost`)."""
    resume_schema: Schema = {}  # noqa: RUF012  (read-only: roles replace it, never mutate it)
    """The fields of the role's resume record (:mod:`actorq.replay.run_state`); empty for roles that keep none."""
    _run_state: RunStateStore | None = None

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, index: int | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.dir = role_dir(run_dir, self.name, index)
        self.metrics = MetricsWriter(self.dir)
        self._log_timer = Periodic(config.log_period_s)
        self.started = time.time()

    def step(self) -> None:
        raise NotImplementedError

    def write_metrics(self) -> None:
        """Write one metrics row (roles override)."""

    def status_record(self) -> RoleStatus:
        """The role's typed progress record (roles override)."""
        raise NotImplementedError

    def status_fields(self) -> dict:
        """The fields every record carries (role, label, start time, this process's CPU seconds when it owns it)."""
        return {
            "role": self.name,
            "label": self.dir.name,
            "started": self.started,
            "cpu_s": time.process_time() if self.own_process else None,
        }

    def open_run_state(
        self, client, weights_key: WeightsKey | None, budget_s: float
    ) -> dict[str, np.ndarray] | None:
        """Find this role's resume record on the replay server (``client``'s): what an earlier process of the run
        left, on whichever host it ran (restart, resume), or None (a new run). From here on :meth:`publish_status`
        stores :meth:`resume_values` there too.

        Raises:
            RunStateError: A record that is not this role's kind (another ActorQ version wrote it).
            ReplayUnreachableError: Replay did not answer within ``budget_s``.
        """
        from actorq.replay.run_state import RunStateStore

        self._run_state = RunStateStore(client, self.dir.name, weights_key.run_id_hex if weights_key else "")
        return self._run_state.resume(self.resume_schema, budget_s)

    def resume_values(self) -> dict[str, np.ndarray]:
        """The fields of :attr:`resume_schema` now (roles that resume override)."""
        raise NotImplementedError

    def save_run_state(self) -> None:
        """Store :meth:`resume_values` on replay (once :meth:`open_run_state` ran; a failed write is logged)."""
        if self._run_state is not None:
            self._run_state.write(self.resume_values())

    def publish_status(self) -> None:
        """Replace ``status.json`` with :meth:`status_record` (what supervisors and people read) and store the resume
        record on replay (what a restarted role reads, on any host)."""
        write_status(self.dir, self.status_record())
        self.save_run_state()

    def report(self) -> None:
        """One metrics row (for people), the status record (for the supervisor) and, in a container, the heartbeat
        its health check reads."""
        self.write_metrics()
        self.publish_status()
        heartbeat(self.name, self.config.log_period_s, self.health_port())

    def health_port(self) -> int | None:
        """The port a container health check must find open (replay's); None for roles that serve nothing."""
        return None

    def run(self, stop: threading.Event) -> None:
        try:
            heartbeat(self.name, self.config.log_period_s, self.health_port())
            while not stop.is_set():
                self.step()
                if self._log_timer.due():
                    self.report()
        finally:
            self.report()
            self.close()

    def close(self) -> None:
        self.metrics.close()


class VersionRecord:
    """The last weight version a role installed or published, in a small JSON file that outlives the process, so
    a restarted role knows it (within a run: the file names the run id it belongs to, and another run's is ignored).

    An actor uses it as the floor below which it never installs weights again, the quantizer as the version it must
    continue above.
    """

    def __init__(self, path: str | Path, run_id: str):
        self.path = Path(path)
        self.run_id = run_id or "unsigned"

    def read(self, field: str = "version") -> int:
        """The recorded ``field`` for this run, or -1 (no file, another run's, unreadable)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return -1
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s (%s)", self.path, type(exc).__name__)
            return -1
        if not isinstance(data, dict) or data.get("run_id") != self.run_id:
            return -1
        value = data.get(field)
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    def write(self, version: int, **extra: int) -> None:
        """Record ``version`` and ``extra`` ints (atomically: a crash leaves the old record or the new one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        fields = {k: int(v) for k, v in extra.items()}
        try:
            tmp.write_text(json.dumps({"run_id": self.run_id, "version": int(version), **fields}))
            os.replace(tmp, self.path)
        except OSError as exc:  # a full disk must not stop the role; it only weakens the restart guarantee
            log.warning("could not record weights version %d in %s: %s", version, self.path, exc)


class StallWatchdog:
    """Reports a call that blocks longer than ``timeout_s`` while it is still blocked (Reverb's rate limiter,
    a dead replay server or a cut link), instead of learning about it only once, and if, the call returns.

    Wrap the blocking call in :meth:`watch`; a daemon thread logs a warning once per stalled call and counts it.
    ``stalls`` and :meth:`take_longest` feed the role's metrics.
    """

    def __init__(self, what: str, timeout_s: float, poll_s: float = 0.5):
        self.what = what
        self.timeout_s = float(timeout_s)
        self.stalls = 0
        self._since: float | None = None
        self._reported = False
        self._longest = 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(poll_s,), name="stall-watchdog", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Time the enclosed call (not reentrant: one watched call at a time, on one thread)."""
        started = time.monotonic()
        self._since, self._reported = started, False
        try:
            yield
        finally:
            self._since = None
            took = time.monotonic() - started
            self._longest = max(self._longest, took)
            if self._reported:
                log.warning("%s unblocked after %.1fs", self.what, took)

    def take_longest(self) -> float:
        """The longest watched call (or the one still blocked) since the previous take, in seconds."""
        since = self._since
        longest = max(self._longest, time.monotonic() - since if since is not None else 0.0)
        self._longest = 0.0
        return longest

    def _loop(self, poll_s: float) -> None:
        while not self._closed.wait(poll_s):
            since = self._since
            if since is None or self._reported or time.monotonic() - since < self.timeout_s:
                continue
            self._reported = True
            self.stalls += 1
            log.warning(
                "%s blocked for more than %.0fs (replay.rate_limiter_timeout_s): replay unreachable or "
                "rate-limited; still waiting",
                self.what,
                self.timeout_s,
            )

    def close(self) -> None:
        self._closed.set()
