"""The last weight version a role installed or published, kept in a file that outlives its process."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


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
