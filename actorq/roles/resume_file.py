"""A role's own copy of its resume record, ``RUN_DIR/<label>/resume.json``: what it trusts when the record on the
replay server is missing or rejected (a table emptied by ``reset``, a forged or foreign record, a replay restored
from an older checkpoint). Written with fsync of the file and its directory, so it survives a power loss; read
with the same bounds as the replay record (:func:`actorq.replay.run_state_record.check_fields`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from actorq.durable import write_atomic
from actorq.replay.run_state_record import RejectedRecordError, Schema, check_fields

log = logging.getLogger(__name__)

RESUME_FILE = "resume.json"
"""The file name inside the role's directory."""


class ResumeFile:
    """``directory/resume.json`` for run ``run_id`` (another run's file is ignored)."""

    def __init__(self, directory: str | Path, run_id: str):
        self.path = Path(directory) / RESUME_FILE
        self.run_id = run_id

    def read(self, schema: Schema) -> dict[str, np.ndarray] | None:
        """The fields, or None (no file, another run's, unreadable or out of bounds: logged)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s (%s)", self.path, type(exc).__name__)
            return None
        if not isinstance(data, dict) or data.get("run_id") != self.run_id:
            return None
        fields = data.get("fields")
        if not isinstance(fields, dict):
            log.warning("ignoring %s: no fields", self.path)
            return None
        try:
            arrays = {
                name: np.asarray(fields[name], dtype=spec.dtype)
                for name, spec in schema.items()
                if name in fields
            }
            return check_fields(arrays, schema)
        except (RejectedRecordError, TypeError, ValueError, OverflowError) as exc:
            log.warning("ignoring %s: %s", self.path, exc)
            return None

    def write(self, values: dict[str, np.ndarray]) -> None:
        """Replace the file with ``values`` (fsynced).

        Raises:
            OSError: The write failed (the previous file is left as it was).
        """
        fields = {name: np.asarray(v).tolist() for name, v in values.items()}
        write_atomic(self.path, json.dumps({"run_id": self.run_id, "fields": fields}))
