"""A role started with ``--stop-with-parent PID`` stops (as on SIGTERM) once its launcher is gone, even by -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actorq.launchers.topology import RoleSpec, role_command
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]

# The role stand-in: the stop handlers and parent watch a role's main() installs, then it waits to be stopped and
# says how (the marker file) so the test can tell a graceful stop from being killed.
ROLE = textwrap.dedent(
    """
    import os, sys, threading
    from actorq.roles.signals import install_stop_handlers, stop_with_parent
    stop = threading.Event()
    install_stop_handlers(stop)
    stop_with_parent(int(sys.argv[2]), poll_s=0.05, **dict(zip(("parent", "this"), sys.argv[3:])))
    open(sys.argv[1] + ".ready", "w").close()
    stop.wait(60)
    with open(sys.argv[1] + ".stopped", "w") as f:
        f.write("graceful" if stop.is_set() else "timed out")
    """
)

# The launcher stand-in: starts the role in its own session, as LocalPlacement does, then waits to be killed.
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    role = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], str(os.getpid())],
                            start_new_session=True)
    print(role.pid, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.subprocess
def test_a_role_stops_gracefully_once_its_launcher_is_killed(tmp_path):
    marker = str(tmp_path / "role")
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, ROLE, marker], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    role_pid = int(launcher.stdout.readline())
    try:
        wait_until(lambda: os.path.exists(marker + ".ready"), 60, "the role to start watching its launcher")
        assert not os.path.exists(marker + ".stopped")  # a live launcher leaves it running
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=10)
        wait_until(lambda: os.path.exists(marker + ".stopped"), 30, "the orphaned role to stop")
        assert Path(marker + ".stopped").read_text() == "graceful"
    finally:
        launcher.kill()
        if _alive(role_pid):
            os.kill(role_pid, signal.SIGKILL)


# A pid no process can have (Linux's pid_max is at most 2**22) stands for a parent that died between spawning the
# process and its first check.
NOT_PARENT = 2**22 + 1


def _orphan(tmp_path: Path, *names: str) -> str:
    """Run the stand-in under a parent that is already gone; check it stopped gracefully; return its stderr."""
    marker = str(tmp_path / "role")
    role = subprocess.Popen(
        [sys.executable, "-c", ROLE, marker, str(NOT_PARENT), *names],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = role.communicate(timeout=60)
        assert role.returncode == 0
        assert Path(marker + ".stopped").read_text() == "graceful"
        return err
    finally:
        role.kill()


@pytest.mark.subprocess
def test_a_role_whose_launcher_is_already_gone_stops_at_once(tmp_path):
    err = _orphan(tmp_path)
    assert f"the launcher (pid {NOT_PARENT}) that started this role is gone: stopping" in err


@pytest.mark.subprocess
def test_the_stop_says_what_was_started_by_what(tmp_path):
    # `actorq train --stop-with-parent` is a run under some parent (an experiment), not a role under a launcher.
    err = _orphan(tmp_path, "parent process", "run")
    assert f"the parent process (pid {NOT_PARENT}) that started this run is gone: stopping" in err
    assert "launcher" not in err


def test_launchers_pass_their_pid_only_when_asked():
    spec = RoleSpec("actor", 1)
    plain = role_command(spec, "c.yaml", "run", "h:1", 1, weights_key_file=None)
    owned = role_command(spec, "c.yaml", "run", "h:1", 1, weights_key_file=None, parent_pid=4242)
    assert "--stop-with-parent" not in plain
    assert owned[-2:] == ["--stop-with-parent", "4242"] and owned[:-2] == plain
