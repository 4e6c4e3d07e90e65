"""Replay's checkpoints on disk: the last one replay completed is synced and kept until the next one is.

Reverb 0.7.3 keeps one checkpoint per directory (``<root>/<timestamp>/``, complete once its ``DONE`` file exists),
deletes the previous one as soon as it has written a new one, and syncs neither; a checkpoint whose files never
reached the disk whole (a power loss) loads as empty tables, silently. And any client of the port may ask for a
checkpoint (``checkpoint()`` has no authentication). So replay keeps its own: after each checkpoint it asked for,
it fsyncs it and hard-links it into ``<root>.kept/`` (no copy: the same files), and only then drops the kept one
before it. When a server starts on ``<root>`` (:func:`restore_kept`) and the newest checkpoint there is not the
kept one (one that was never synced, or one a client asked for since), the kept one is what it loads; the other is
moved to ``<root>.unsynced/`` for whoever wants to look at it.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import reverb

from actorq.durable import sync_dir, sync_tree
from actorq.errors import ActorQError

log = logging.getLogger(__name__)

DONE = "DONE"
"""The file Reverb writes last into a checkpoint directory."""


class CheckpointError(ActorQError, OSError):
    """A checkpoint that could not be written or kept (a full disk, a directory gone): replay carries on."""


def kept_root(root: str | Path) -> Path:
    """Where the kept checkpoint of the checkpoints under ``root`` lives."""
    root = Path(root)
    return root.with_name(root.name + ".kept")


def newest(directory: Path) -> Path | None:
    """The newest complete checkpoint in ``directory`` (Reverb's choice: the last name with a ``DONE`` file)."""
    if not directory.is_dir():
        return None
    done = [p for p in directory.iterdir() if p.is_dir() and (p / DONE).is_file()]
    return max(done, key=lambda p: p.name, default=None)


def checkpoint(client: reverb.Client, root: str | Path) -> str:
    """Ask the server (``client``'s, writing under ``root``) for a checkpoint, sync it and keep it.

    Raises:
        CheckpointError: Writing, syncing or keeping it failed (the previous kept checkpoint is intact).
    """
    try:
        path = client.checkpoint()
        _keep(Path(root), Path(path))
    except (
        Exception
    ) as exc:  # Reverb maps a failed write to any builtin (ENOSPC: IndexError); only the outcome counts
        raise CheckpointError(f"replay checkpoint under {root} failed: {type(exc).__name__}: {exc}") from exc
    return path


def _keep(root: Path, path: Path) -> None:
    sync_tree(path)
    sync_dir(root)
    kept = kept_root(root)
    kept.mkdir(exist_ok=True)
    staging = kept / f".{path.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for item in path.iterdir():
        os.link(item, staging / item.name)
    sync_tree(staging)
    os.replace(staging, kept / path.name)
    sync_dir(kept)
    for old in kept.iterdir():  # only now, with the new one on disk
        if old.name != path.name:
            shutil.rmtree(old, ignore_errors=True)


def _same(a: Path, b: Path) -> bool:
    names = {p.name for p in a.iterdir()}
    return names == {p.name for p in b.iterdir()} and all(os.path.samefile(a / n, b / n) for n in names)


def restore_kept(root: str | Path) -> None:
    """Before a server starts on ``root``: make the newest checkpoint there the one replay kept, when it has one
    and the newest there is another (moved aside to ``<root>.unsynced/``)."""
    root = Path(root)
    kept = newest(kept_root(root))
    if kept is None:
        return
    current = newest(root)
    if current is not None and current.name == kept.name and _same(current, kept):
        return
    aside = root.with_name(root.name + ".unsynced")
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    for entry in root.iterdir():
        os.replace(entry, aside / entry.name)
    (root / kept.name).mkdir()
    for item in kept.iterdir():
        os.link(item, root / kept.name / item.name)
    sync_tree(root)
    log.warning(
        "replay restores the checkpoint it last completed, %s, not %s (never synced by replay, or asked for by "
        "another client): that one is set aside in %s",
        kept.name,
        current.name if current is not None else "an incomplete one",
        aside,
    )
