"""Container health checks: a role's heartbeat file, and ``python -m actorq.roles.health`` that judges it.

When ``$ACTORQ_HEALTH_FILE`` is set (the Docker images set it), every role writes a small JSON heartbeat there as
its loop runs: when it starts and each time it writes a metrics row. The image's ``HEALTHCHECK`` runs this module,
which reports the container unhealthy when

- there is no heartbeat yet (the role is still starting: Docker's start period covers that),
- the last one is older than its ``stale_after_s`` (the loop is stuck: a native call that never returns, a role
  blocked on a replay that is gone), or
- the role is replay and its port does not accept a connection.

So "healthy" means the role is doing its work, not only that its process exists. Outside containers nothing sets the
variable and no file is written.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

HEALTH_FILE_ENV = "ACTORQ_HEALTH_FILE"
STALE_FLOOR_S = 60.0
"""A heartbeat is stale after max(this, 10 metrics periods): long enough for a learner step or checkpoint that
takes a while, short enough that a stuck role shows within a couple of minutes."""
PERIODS_BEFORE_STALE = 10


def heartbeat(role: str, log_period_s: float, port: int | None = None) -> None:
    """Record that ``role``'s loop is running (atomically), when ``$ACTORQ_HEALTH_FILE`` names a file."""
    target = os.environ.get(HEALTH_FILE_ENV)
    if not target:
        return
    path = Path(target)
    beat = {
        "role": role,
        "pid": os.getpid(),
        "time": time.time(),
        "stale_after_s": max(STALE_FLOOR_S, PERIODS_BEFORE_STALE * float(log_period_s)),
        "port": port,
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(beat))
        os.replace(tmp, path)
    except OSError as exc:  # a health file must never stop a role; the check then reports it stale
        log.warning("could not write heartbeat %s: %s", path, exc)


def check(path: str | Path, now: float | None = None, connect_timeout_s: float = 3.0) -> tuple[bool, str]:
    """Judge a heartbeat file: (healthy, the reason in one line)."""
    try:
        beat = json.loads(Path(path).read_text())
        role, stamp, stale_after = str(beat["role"]), float(beat["time"]), float(beat["stale_after_s"])
        port = beat.get("port")
    except FileNotFoundError:
        return False, f"no heartbeat at {path} yet (the role has not started its loop)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return False, f"unreadable heartbeat {path}: {type(exc).__name__}: {exc}"
    age = (time.time() if now is None else now) - stamp
    if age > stale_after:
        return (
            False,
            f"{role}: last heartbeat {age:.0f}s ago (stale after {stale_after:.0f}s): its loop is stuck",
        )
    if port is not None:
        try:
            socket.create_connection(("localhost", int(port)), connect_timeout_s).close()
        except OSError as exc:
            return False, f"{role}: port {port} refuses connections ({exc})"
    return True, f"{role}: last heartbeat {age:.0f}s ago" + (
        f", port {port} open" if port is not None else ""
    )


def main() -> int:
    """Exit 0 when the heartbeat at ``$ACTORQ_HEALTH_FILE`` is fresh, 1 otherwise (Docker's HEALTHCHECK contract)."""
    path = os.environ.get(HEALTH_FILE_ENV)
    if not path:
        print(f"{HEALTH_FILE_ENV} is not set: no heartbeat to check", file=sys.stderr)
        return 1
    healthy, reason = check(path)
    print(reason)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
