"""The run's weights key on disk: created by the launcher, found by every role that signs or verifies weights.

A run's key lives in ``RUN_DIR/secrets/weights.key`` (directory 0700, file 0600): 64 hex digits, made by
:func:`ensure_run_key` when a launcher starts a run and kept for the run's lifetime, so ``actorq train --resume``
and restarted roles sign and verify with the same key. The key itself is never logged, never written to
``config.yaml``, ``summary.json`` or metrics; only its run id (a one-way fingerprint) is.

Which key file a run uses is one rule, :func:`find_key_file`, the same for the launcher (``actorq train``) and for
every role (``actorq role``, and the roles each placement starts): ``--weights-key-file PATH`` when given; else the
file named by ``$ACTORQ_WEIGHTS_KEY_FILE`` (how a Docker or Kubernetes secret is passed); else
``RUN_DIR/secrets/weights.key``. The launcher resolves it once (creating ``RUN_DIR/secrets/weights.key`` when the rule
finds nothing) and hands that path to every role it starts as ``--weights-key-file``, so a role on the launcher's host
uses the launcher's key; a role on another host (Ray) loads the same path there, and reports the run id of what it
loaded for the summary. Without a key a role refuses to start, unless told ``--insecure-weights``: then it signs
nothing and accepts unsigned weights, and says so loudly.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from actorq.errors import UsageError
from actorq.quantize.signing import WeightsKey, generate_key, key_from_text, key_to_text
from actorq.status import ROLE_NAMES

log = logging.getLogger(__name__)

KEY_ENV = "ACTORQ_WEIGHTS_KEY_FILE"
"""Environment variable naming the weights key file (e.g. ``/run/secrets/weights_key`` in Docker)."""
SECRETS_DIR = "secrets"
KEY_FILE = "weights.key"
KEY_ROLES = tuple(role for role in ROLE_NAMES if role != "replay")
"""Roles that sign or verify weight messages (replay only stores bytes)."""

HOW_TO_FIX = (
    "pass --weights-key-file PATH (the run's RUN_DIR/secrets/weights.key, which `actorq train` creates; or a file "
    f"made with `(umask 077; openssl rand -hex 32 > weights.key)`), or set {KEY_ENV}=PATH; or, on a network only "
    "you can reach, --insecure-weights to run with unsigned weights"
)


class WeightsKeyError(UsageError):
    """No usable weights key; the message says what is wrong and how to fix it (never the key's content)."""


def run_key_path(run_dir: str | Path) -> Path:
    """``RUN_DIR/secrets/weights.key``."""
    return Path(run_dir) / SECRETS_DIR / KEY_FILE


def ensure_run_key(run_dir: str | Path) -> Path:
    """The run's key file: created with a fresh random key when absent, checked and kept when present (a resumed
    run, or a run directory reused: the key lives as long as the run directory). Returns its path.

    Raises:
        WeightsKeyError: An existing key file is unreadable or malformed.
    """
    path = run_key_path(run_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(
        path.parent, 0o700
    )  # mkdir's mode is filtered by the umask, and an existing directory kept its own
    if path.exists():
        if stat.S_IMODE(path.stat().st_mode) != 0o600:
            os.chmod(path, 0o600)
        load_key_file(path)
        log.info("weights key: reusing %s", path)
        return path
    # O_EXCL: never follow a link planted at the path or overwrite a key another launcher just made.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key_to_text(generate_key()).encode())
    finally:
        os.close(fd)
    log.info("weights key: created %s (mode 0600)", path)
    return path


def load_key_file(path: str | Path) -> WeightsKey:
    """Read a key file.

    Raises:
        WeightsKeyError: Missing, unreadable or not 64 hex digits.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise WeightsKeyError(f"weights key file {path} does not exist; {HOW_TO_FIX}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WeightsKeyError(f"weights key file {path} cannot be read ({type(exc).__name__})") from None
    try:
        key = key_from_text(text)
    except ValueError as exc:
        raise WeightsKeyError(f"weights key file {path}: {exc}") from None
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o007:
        log.warning("weights key file %s is open to every user (mode %04o): chmod 600 it", path, mode)
    elif mode & 0o070:
        # A Kubernetes Secret reaches a non-root pod only through its fsGroup (mode 0440): expected there, so a
        # note rather than a warning every role repeats; elsewhere it says who else holds the key.
        log.info("weights key file %s is readable by group %d (mode %04o)", path, info.st_gid, mode)
    return key


def find_key_file(
    run_dir: str | Path, key_file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """THE rule for which key file a run uses: ``key_file`` (``--weights-key-file``) when given; else
    ``$ACTORQ_WEIGHTS_KEY_FILE`` when set (in ``environ``, default this process's environment); else
    ``RUN_DIR/secrets/weights.key`` when it exists; else None. Whether the file is usable is :func:`load_key_file`'s
    question: an explicit path that does not exist is an error, never a reason to look further."""
    environ = os.environ if environ is None else environ
    if key_file:
        return Path(key_file)
    if environ.get(KEY_ENV):
        return Path(environ[KEY_ENV])
    path = run_key_path(run_dir)
    return path if path.exists() else None


def resolve_weights_key(
    run_dir: str | Path,
    key_file: str | Path | None = None,
    insecure: bool = False,
    environ: Mapping[str, str] | None = None,
) -> WeightsKey | None:
    """The key a role signs or verifies with (:func:`find_key_file`'s file); None only when ``insecure``.

    Raises:
        WeightsKeyError: No key found (and not ``insecure``), both a key file and ``insecure`` given, or the key
            file is unusable.
    """
    if insecure:
        if key_file:
            raise WeightsKeyError("--insecure-weights and --weights-key-file contradict each other; pass one")
        return None
    source = find_key_file(run_dir, key_file, environ)
    if source is None:
        raise WeightsKeyError(f"no weights key for this run (weight messages are signed); {HOW_TO_FIX}")
    return load_key_file(source)


def run_key_file(
    run_dir: str | Path, key_file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The launcher's side of the rule: :func:`find_key_file`'s file, checked, or ``RUN_DIR/secrets/weights.key``
    created when the rule finds none (a new run). Returns the path every role is then given.

    Raises:
        WeightsKeyError: The file the rule names is missing, unreadable or malformed.
    """
    path = find_key_file(run_dir, key_file, environ)
    if path is None or path == run_key_path(run_dir):
        return ensure_run_key(run_dir)
    load_key_file(path)
    log.info("weights key: %s", path)
    return path


def describe(key: WeightsKey | None) -> dict[str, str]:
    """What a summary may say about the run's weight signing: the scheme and run id, never the key."""
    if key is None:
        return {"scheme": "none (--insecure-weights)", "run_id": ""}
    return {"scheme": "hmac-sha256", "run_id": key.run_id_hex}
