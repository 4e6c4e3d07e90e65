"""How a role's (or a run's) process stops: SIGTERM/SIGINT handlers, an exit deadline that holds even when the main
thread is stuck in native code, and stopping once the launcher that started it is gone."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
import time

log = logging.getLogger(__name__)

STOP_DEADLINE_S = 6.0
"""After a stop signal a role has this long to finish; then it dumps its stacks to its log and exits (status 1).
Shorter than the launchers' grace period, so a role ends itself, with a traceback, before it is SIGKILLed."""


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
