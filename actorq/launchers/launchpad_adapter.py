"""Every use ActorQ makes of Launchpad's private members, in one place.

Launchpad 0.5.0 (pinned) has no public way to list the processes a launched program started or to take its
signal handlers off again; these two functions do it through ``WorkerManager._active_workers`` and
``WorkerManager._disable_signals``. :func:`check_surface` (run before a program is launched, and by
``tests/unit/test_launchpad_adapter.py``) fails at once, naming each missing member, if the installed Launchpad
no longer has them.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import psutil

from actorq.errors import ActorQError


class LaunchpadSurfaceError(ActorQError, RuntimeError):
    """The installed Launchpad lacks a private member ActorQ relies on."""


def missing_surface() -> list[str]:
    """One line per private member the installed Launchpad lacks (empty: all as in 0.5.0)."""
    try:
        from launchpad.launch.worker_manager import WorkerManager
    except ImportError as err:
        return [f"launchpad.launch.worker_manager.WorkerManager cannot be imported ({err})"]
    where = "launchpad.launch.worker_manager.WorkerManager"
    problems = []
    if not callable(getattr(WorkerManager, "_disable_signals", None)):
        problems.append(f"{where}._disable_signals: no longer a method")
    try:
        init = inspect.getsource(WorkerManager.__init__)
    except (OSError, TypeError):
        init = ""
    if not re.search(r"\bself\._active_workers\s*=\s*collections\.defaultdict\(list\)", init):
        problems.append(f"{where}._active_workers: no longer a dict of lists assigned in __init__")
    return problems


def check_surface() -> None:
    """Raise :class:`LaunchpadSurfaceError` naming every missing private member (ActorQ pins Launchpad 0.5.0)."""
    problems = missing_surface()
    if problems:
        raise LaunchpadSurfaceError(
            "the installed Launchpad lacks private members ActorQ uses (it needs dm-launchpad==0.5.0; install "
            "it from requirements.lock): " + "; ".join(problems)
        )


def active_workers(manager: Any) -> dict[str, list[psutil.Process]]:
    """The processes launchpad started for a launched program, per process group (``learner/0``, ...)."""
    return {label: list(workers) for label, workers in manager._active_workers.items()}


def disable_signals(manager: Any) -> None:
    """Take launchpad's signal handlers off again (``lp.launch`` installs them; we stop the workers ourselves)."""
    manager._disable_signals()
