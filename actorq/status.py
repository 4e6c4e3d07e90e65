"""Each role's progress as one typed status record: what launchers, supervisors and people read.

A role replaces ``RUN_DIR/<label>/status.json`` atomically (write a temporary file, then ``os.replace``) every
``log_period_s`` and when it stops, so a reader sees the previous record or the new one, never half of one. The
records are the contract between roles and everything that watches them: the run supervisor (stop conditions, the
live view, summary.json), and placements whose roles live on other hosts (the Ray placement asks the role for the
same record instead of reading the file). A restarted or resumed role does not read it: the file is on the host the
role ran on, which a restart may not be; what it resumes from is its record on the replay server
(``actorq.replay.run_state``). Metrics CSV and TensorBoard files are for people; nothing reads them to make a
decision.

A field renamed here breaks every reader at import or in the unit tests (``tests/unit/test_status.py``), not in the
middle of a run: records are parsed into these dataclasses and unknown, missing or mistyped fields are a
:class:`StatusError`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actorq.durable import write_atomic
from actorq.errors import ActorQError

log = logging.getLogger(__name__)

RUN_DIR_FORMAT = 1
"""The version of the run directory's layout and files (``config.yaml``, ``summary.json``, ``<role>/metrics.csv``,
``<role>/status.json``; docs/usage.md#run-directories), written into ``summary.json`` as ``run_dir_format``. The run
directory is the one interface between the runtime and the lab: a change a reader of an older layout would
misread raises this number, and readers refuse a newer one than they know."""

STATUS_FILE = "status.json"
"""The file name of a role's status record inside its directory (``RUN_DIR/<label>/``)."""
COUNTER_LIMIT = 1 << 62
"""Every counter a role keeps (steps, episodes, versions) stays below this: a value at or above it was not counted
by a run (a resume record or message beyond it is rejected, and the supervisor ignores it)."""
RETURN_LIMIT = 1e8
"""The largest absolute episode return a record may hold (returns of the tasks ActorQ runs stay orders of
magnitude below it): a value beyond it, or a non-finite one, was not measured (rejected, or ignored)."""


class StatusError(ActorQError, ValueError):
    """A status record that is not one this version of ActorQ writes (unknown role, fields missing, extra or mistyped)."""


@dataclass(frozen=True, kw_only=True)
class RoleStatus:
    """What every role reports."""

    role: str
    """Role name: replay, learner, quantizer, actor or evaluator."""
    label: str
    """Role label: the role name, or ``actor_<i>`` for actor i."""
    pid: int = field(default_factory=os.getpid)
    """Process id of the process running the role."""
    host: str = field(default_factory=socket.gethostname)
    """Host name of the machine running the role."""
    time: float = field(default_factory=time.time)
    """Unix time the record was written."""
    started: float = 0.0
    """Unix time this process started the role."""
    cpu_s: float | None = None
    """CPU seconds of the role's process (None when the role shares its process, e.g. the in-process launcher)."""
    step: int = 0
    """The role's main counter: learner steps (learner), completed env steps over all its environments (actor),
    the learner step last quantized (quantizer), the learner step last evaluated (evaluator), experience inserts
    (replay)."""
    write_failures: int = 0
    """Writes to the role's disk that failed (metrics rows, status records, resume files, checkpoints: a full disk)
    since the process started; the role carried on."""


@dataclass(frozen=True, kw_only=True)
class ReplayStatus(RoleStatus):
    """The replay server."""

    port: int = 0
    """The port the Reverb server listens on."""
    size: int = 0
    """Items in the experience table."""
    inserts: int = 0
    """Experience inserts completed (the rate limiter's count)."""
    samples: int = 0
    """Experience samples completed (the rate limiter's count)."""


@dataclass(frozen=True, kw_only=True)
class LearnerStatus(RoleStatus):
    """The learner."""

    steps_per_s: float = 0.0
    """Learner steps per second over the last period."""
    published: int = 0
    """fp32 weight messages published to the quantizer."""


@dataclass(frozen=True, kw_only=True)
class QuantizerStatus(RoleStatus):
    """The parameter quantizer."""

    version: int = 0
    """Version of the last policy message it published (versions continue above this after a restart)."""
    message_bytes: int = 0
    """Size of the last policy message."""
    quantize_ms: float = 0.0
    """Time the last quantization took."""


@dataclass(frozen=True, kw_only=True)
class ActorStatus(RoleStatus):
    """One actor process (all of its environments)."""

    episodes: int = 0
    """Episodes finished over all its environments."""
    steps_per_s: float = 0.0
    """Env steps per second over the last period."""
    weights_version: int = -1
    """Version of the policy weights it acts with (-1: none yet)."""
    weights_learner_step: int = -1
    """Learner step those weights came from (-1: none yet)."""
    episode_return: float | None = None
    """Return of the last finished episode."""
    broadcasts_received: int = 0
    """Weight messages installed."""
    rejected_messages: int = 0
    """Weight messages refused (forged, stale, corrupt, for another network)."""
    breakdown_s: dict[str, float] = field(default_factory=dict)
    """Seconds spent per runtime component (``actorq.timers.BREAKDOWN_COMPONENTS``) since the role started."""


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """One evaluation of the learner's fp32 policy."""

    time: float
    """Unix time the evaluation finished."""
    learner_step: int
    """Learner step of the evaluated weights."""
    actor_steps: int
    """Experience inserts (env steps over all actors) when it began."""
    eval_return: float
    """Mean undiscounted return over the evaluation episodes."""


@dataclass(frozen=True, kw_only=True)
class EvaluatorStatus(RoleStatus):
    """The evaluator."""

    evaluations: tuple[Evaluation, ...] = ()
    """Every evaluation of this run so far, in order (a few hundred at most: one per ``evaluator.period_s``)."""
    rejected_messages: int = 0
    """Learner weight messages refused."""


RECORDS: dict[str, type[RoleStatus]] = {
    "replay": ReplayStatus,
    "learner": LearnerStatus,
    "quantizer": QuantizerStatus,
    "actor": ActorStatus,
    "evaluator": EvaluatorStatus,
}
"""The status record type of each role, in start order."""
ROLE_NAMES: tuple[str, ...] = tuple(RECORDS)
"""The roles of a run (replay, learner, quantizer, actor, evaluator): the one list every module names them by."""


def role_label(role: str, index: int = 0) -> str:
    """A role's label, the name of its directory and records: the role name, ``actor_<i>`` for actor i, and for
    replay shard k (``replay.shards``) ``replay`` (k = 0: the one-server name) or ``replay_<k>``."""
    if role == "replay":
        return f"replay_{index}" if index else "replay"
    return f"{role}_{index}" if role == "actor" else role


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_dict(record: RoleStatus) -> dict[str, Any]:
    """The record as plain JSON values (tuples as lists): the same form whether it goes to ``status.json`` or
    across Ray, so :func:`from_dict` reads both alike."""
    return _plain(dataclasses.asdict(record))


FIX_HINT = (
    "status records are written whole by actorq.status.write_status; a record missing or mistyping a field "
    "comes from another ActorQ version (or a writer that bypasses write_status): run every role of the run with "
    "this version, or, to watch a run directory written by another version, delete that role's status.json "
    "(roles resume from their records on replay, never from this file: deleting it loses nothing they need)"
)
"""What to do about a record that does not parse (the end of every :class:`StatusError` about its fields)."""


def _has_type(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's annotation (the few kinds status records use)."""
    if hint is type(None):
        return value is None
    if hint is float:  # JSON has one number type: an integral float may arrive as an int
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, a) for a in args)
    if origin is dict:
        return isinstance(value, dict) and all(
            _has_type(k, args[0]) and _has_type(v, args[1]) for k, v in value.items()
        )
    raise TypeError(f"status records have no fields of type {hint!r}")  # a new field kind: teach it here


def _parse(cls: type, data: Any, where: str) -> Any:
    """``cls(**data)`` once every field is present, known and of its annotated type.

    Raises:
        StatusError: Naming ``where``, the offending fields and :data:`FIX_HINT`.
    """
    if not isinstance(data, dict):
        raise StatusError(f"{where}: a {cls.__name__} is a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in data]
    if missing:
        raise StatusError(f"{where}: {cls.__name__} is missing field(s) {', '.join(missing)}; {FIX_HINT}")
    extra = sorted(set(data) - set(names))
    if extra:
        raise StatusError(f"{where}: {cls.__name__} has no field(s) {', '.join(extra)}; {FIX_HINT}")
    values = dict(data)
    for name in names:
        hint = hints[name]
        if typing.get_origin(hint) is tuple:  # tuple[Evaluation, ...]: a JSON list of records
            item_cls = typing.get_args(hint)[0]
            if not isinstance(data[name], list):
                raise StatusError(
                    f"{where}: field {name} is a list, got {type(data[name]).__name__}; {FIX_HINT}"
                )
            values[name] = tuple(
                _parse(item_cls, e, f"{where}, {name}[{i}]") for i, e in enumerate(data[name])
            )
        elif not _has_type(data[name], hint):
            raise StatusError(
                f"{where}: field {name} of {cls.__name__} must be {getattr(hint, '__name__', hint)}, "
                f"got {data[name]!r}; {FIX_HINT}"
            )
    return cls(**values)


def from_dict(data: Any, source: str = "status record") -> RoleStatus:
    """Parse a record written by :func:`to_dict` (or read from a file).

    Every field must be present: the dataclasses' defaults serve writers building a record in code, never a
    reader filling in what a record lacks (a missing field read as zero would look like a role that made no
    progress). Fields whose value may be ``None`` (``cpu_s``, ``episode_return``) are present with ``null``.

    Args:
        data: The decoded JSON.
        source: Where it came from, for the error (a file path, or the role asked).

    Raises:
        StatusError: Not a mapping, an unknown role, or fields missing, extra or of the wrong type.
    """
    if not isinstance(data, dict):
        raise StatusError(f"{source}: a status record is a JSON object, got {type(data).__name__}")
    cls = RECORDS.get(data.get("role"))  # type: ignore[arg-type]
    if cls is None:
        raise StatusError(
            f"{source}: unknown role {data.get('role')!r} in status record; roles: {', '.join(RECORDS)}; {FIX_HINT}"
        )
    return _parse(cls, data, source)


_FAILING: set[Path] = set()
"""Status files whose last write failed (warned about once per outage)."""


def write_status(directory: str | Path, record: RoleStatus) -> bool:
    """Replace ``directory/status.json`` with ``record`` atomically; False when the write failed (a full disk):
    warned about once per outage, never raised, since it must not stop the role (the record only gets older)."""
    path = Path(directory) / STATUS_FILE
    try:
        write_atomic(path, json.dumps(to_dict(record)), sync=False)
    except OSError as exc:
        if path not in _FAILING:
            log.warning("could not write %s (%s); retrying at every report", path, exc)
        _FAILING.add(path)
        return False
    if path in _FAILING:
        log.info("%s written again", path)
        _FAILING.discard(path)
    return True


def read_status(directory: str | Path) -> RoleStatus | None:
    """The record in ``directory/status.json``; None when there is none yet (or the file cannot be read: logged).

    Raises:
        StatusError: The file exists but is not a record this version writes (not JSON, fields missing, extra or
            mistyped): the message names the file and what to do. Writes are atomic, so this is never a record
            caught half-written.
    """
    path = Path(directory) / STATUS_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StatusError(f"{path}: not JSON ({exc}); {FIX_HINT}") from None
    return from_dict(data, str(path))
