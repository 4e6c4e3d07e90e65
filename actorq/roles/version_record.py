"""The last weight version a role installed or published, kept in a file that outlives its process."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from actorq.durable import WriteOutage, write_atomic

log = logging.getLogger(__name__)


class VersionRecord:
    """The last weight version a role installed or published, in a small JSON file that outlives the process, so
    a restarted role knows it (within a run: the file names the run id it belongs to, and another run's is ignored).

    The learner keeps the version of its last published message in one, so a resumed learner's versions continue
    above it.
    """

    def __init__(self, path: str | Path, run_id: str, outage: WriteOutage | None = None):
        """``outage``: where failed writes are counted and warned about (once per outage); default: its own."""
        self.path = Path(path)
        self.run_id = run_id or "unsigned"
        self._outage = outage or WriteOutage(str(self.path))

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
        """Record ``version`` and ``extra`` ints (atomically, and fsynced with its directory: a crash or a power loss
        leaves the old record or the new one)."""
        fields = {k: int(v) for k, v in extra.items()}
        try:
            write_atomic(self.path, json.dumps({"run_id": self.run_id, "version": int(version), **fields}))
        except OSError as exc:  # a full disk must not stop the role; it only weakens the restart guarantee
            self._outage.failed(exc, self.path)
        else:
            self._outage.succeeded()
