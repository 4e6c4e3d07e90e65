"""Files that outlive a crash, and writes that a full disk must not turn into a dead role.

:func:`write_atomic` replaces a file whole (a reader sees the old content or the new, never half), and with
``sync`` flushes the file and then its directory to the disk before returning, so the new content also survives a
power loss: what version records and the files a resume depends on need. :func:`sync_tree` does the same for a
directory another library wrote (a Reverb checkpoint). :class:`WriteOutage` is the one rule for a write that fails
with ``OSError`` (a full disk, a lost mount): warn when an outage starts, note when it ends, count every failure.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def sync_dir(path: str | Path) -> None:
    """fsync directory ``path`` (its entries: a file created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: str | bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` through a temporary file and ``os.replace``; with ``sync``, fsync the file
    before the rename and the directory after it.

    Raises:
        OSError: The write failed (the old content is left in place; the temporary file is removed).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with tmp.open("wb") as fh:
            fh.write(raw)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        sync_dir(path.parent)


def sync_tree(root: str | Path) -> None:
    """fsync every file and directory under ``root`` (and ``root`` itself), deepest first."""
    root = Path(root)
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        sync_dir(directory)


class WriteOutage:
    """Failed writes of one kind (``what``: "metrics", "status record", "checkpoint"): the first of an outage is
    warned about, the first success after it is noted, and every failure is counted in :attr:`failures`."""

    def __init__(self, what: str):
        self.what = what
        self.failures = 0
        self._failing = False

    def failed(self, exc: BaseException, where: str | Path = "") -> None:
        """One failed write (``exc``: its error; ``where``: the file or directory)."""
        self.failures += 1
        if not self._failing:
            log.warning(
                "could not write %s%s (%s: %s); the role carries on and retries, warning again only after a "
                "write succeeds",
                self.what,
                f": {where}" if where else "",
                type(exc).__name__,
                (str(exc).splitlines() or [""])[0],
            )
        self._failing = True

    def succeeded(self) -> None:
        """One write that went through (ends an outage)."""
        if self._failing:
            log.info("%s written again after %d failed writes so far", self.what, self.failures)
        self._failing = False
