"""Run state that survives a host: what a restarted role needs to resume, kept on the replay server.

A restarted actor, quantizer or evaluator may come back on another host (Ray restarting it on another node, a
KubeRay pod with an ``emptyDir`` run directory) where its old run directory is not. Its resume record (counters,
the weights-version floor, the evaluation history) therefore lives beside the experience, in a one-slot table per
role label (``run_state_<label>``) on the replay server every role already reaches. Reverb cannot look an item up by
key, hence one table per label rather than one keyed table. Reverb's checkpoints hold every table, so a run resumed
from the replay checkpoint resumes its roles' records too (as of that checkpoint, like its experience).

A record is one Reverb item of plain numpy columns, never a pickle:

- ``int64[1]``: the record format (:data:`RUN_STATE_FORMAT`);
- ``uint8[n]``: the run id (the weights key's, ``unsigned`` without one) of the run that wrote it;
- ``uint8[m]``: the field names, comma-separated, in order;
- one column per field, of the dtype and rank the role's schema names.

A record of another run (another key: a replay checkpoint of another run) is ignored with a warning and the role
starts afresh; a record that does not fit the role's schema (another format, other fields, another dtype or rank:
written by another ActorQ version) is a :class:`RunStateError`, so a role never silently restarts its counters at
zero (the overshot step budget and the reset rollback guard this table exists to prevent).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

import numpy as np
import reverb

from actorq.config import ExperimentConfig
from actorq.errors import ActorQError
from actorq.replay.retry import REPLAY_ERRORS, ReplayConnectionError, ReplayOutage, first_line, replay_call
from actorq.status import role_label

log = logging.getLogger(__name__)

RUN_STATE_FORMAT = 1
"""The record layout the module docstring describes; another value is a :class:`RunStateError`."""
TABLE_PREFIX = "run_state_"
"""Run-state tables are named ``run_state_<label>`` (word characters only, like every other table name)."""
RESUMING_ROLES = ("quantizer", "actor", "evaluator")
"""The roles that keep a resume record (the learner's step is in its own checkpoint; replay is the store)."""
WRITE_TIMEOUT_S = 1.0
"""How long a record write may wait for the server. A role writes at every report, and a stopping role's host
writes for a loop still blocked ``STOP_GRACE_S`` (4 s) after the stop, within ``STOP_DEADLINE_S`` (6 s): with
replay already gone (a launcher killed, every role stopping at once) the write costs this long, then gives up."""
READ_TIMEOUT_S = 5.0
"""How long one read attempt may wait for the server."""
UNSIGNED_RUN = "unsigned"
"""The run id of records written without a weights key (``--insecure-weights``)."""

Schema = Mapping[str, tuple[type, int]]
"""A role's record fields: name -> (numpy dtype, number of dimensions), in the order they are stored."""


class RunStateError(ActorQError, ValueError):
    """A resume record on the replay server that is not the one this role writes (format, fields, dtype, rank)."""


FIX_HINT = (
    "the record was written by another ActorQ version (or something else wrote the table): run every role of the "
    "run with one version; to start this role afresh instead, start replay without its checkpoint "
    "(RUN_DIR/checkpoints/replay)"
)


def run_state_table(label: str) -> str:
    """The table holding role ``label``'s record (``actor_0`` -> ``run_state_actor_0``)."""
    return TABLE_PREFIX + label


def run_state_labels(config: ExperimentConfig) -> list[str]:
    """The labels of the run's roles that keep a record (one table each on the replay server)."""
    labels = []
    for role in RESUMING_ROLES:
        if role == "actor":
            labels += [role_label(role, i) for i in range(config.actor.num_actors)]
        else:
            labels.append(role_label(role))
    return labels


def encode(run_id: str, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The Reverb columns of one record (see the module docstring)."""
    names = ",".join(values)
    return [
        np.array([RUN_STATE_FORMAT], dtype=np.int64),
        np.frombuffer(run_id.encode(), dtype=np.uint8),
        np.frombuffer(names.encode(), dtype=np.uint8),
        *(np.asarray(v) for v in values.values()),
    ]


def _text(column: np.ndarray) -> str:
    return bytes(np.asarray(column, dtype=np.uint8)).decode("utf-8", errors="replace")


def decode(
    columns: Sequence[np.ndarray], run_id: str, schema: Schema, where: str
) -> dict[str, np.ndarray] | None:
    """The fields of a record read back, checked against ``schema``; None for another run's record (logged).

    Raises:
        RunStateError: The record's format, field names, dtypes or ranks are not ``schema``'s (names ``where``).
    """
    columns = [np.asarray(c) for c in columns]
    header = columns[0] if columns else None
    if (
        header is None
        or header.dtype != np.int64
        or header.shape != (1,)
        or int(header[0]) != RUN_STATE_FORMAT
    ):
        raise RunStateError(f"{where}: not a run-state record of format {RUN_STATE_FORMAT}; {FIX_HINT}")
    if len(columns) < 3 or columns[1].dtype != np.uint8 or columns[2].dtype != np.uint8:
        raise RunStateError(f"{where}: run id or field names missing; {FIX_HINT}")
    written_by = _text(columns[1])
    if written_by != run_id:
        log.warning(
            "%s: ignoring the resume record of another run (run id %s, this run %s): starting afresh",
            where,
            written_by,
            run_id,
        )
        return None
    names = _text(columns[2]).split(",")
    if names != list(schema) or len(columns) != 3 + len(names):
        raise RunStateError(f"{where}: fields {names}, expected {list(schema)}; {FIX_HINT}")
    fields = {}
    for name, column in zip(names, columns[3:], strict=True):
        dtype, ndim = schema[name]
        if column.dtype != np.dtype(dtype) or column.ndim != ndim:
            raise RunStateError(
                f"{where}: field {name} is {column.dtype}[{column.ndim}-d], expected {np.dtype(dtype)}[{ndim}-d]; "
                f"{FIX_HINT}"
            )
        fields[name] = column
    return fields


class RunStateStore:
    """One role's record on the replay server: written whole (the newest replaces the last), read at start.

    Args:
        client: A client of the run's replay server.
        label: The role's label (``actor_0``, ``quantizer``, ``evaluator``).
        run_id: The run's id (its weights key's); empty for an unsigned run.
    """

    def __init__(self, client: reverb.Client, label: str, run_id: str):
        self._client = client
        self.label = label
        self.table = run_state_table(label)
        self.run_id = run_id or UNSIGNED_RUN
        self._lock = threading.Lock()  # a stopping host's final write may overlap the loop's own
        self._failing = False

    def write(self, values: Mapping[str, np.ndarray]) -> bool:
        """Store ``values`` (within :data:`WRITE_TIMEOUT_S`); False when replay did not take it (logged once per
        outage: the next write tries again, and a role never stops over a record)."""
        columns = encode(self.run_id, values)
        with self._lock:
            try:
                with replay_call():
                    writer = self._client.trajectory_writer(num_keep_alive_refs=1)
                    try:
                        writer.append(columns)
                        writer.create_item(self.table, 1.0, [column[-1] for column in writer.history])
                        writer.flush(timeout_ms=int(WRITE_TIMEOUT_S * 1000))
                    finally:
                        writer.close()
            except REPLAY_ERRORS as exc:
                if not self._failing:
                    log.warning(
                        "%s: could not store its resume record on replay (%s: %s); retrying at the next report",
                        self.label,
                        type(exc).__name__,
                        first_line(exc),
                    )
                self._failing = True
                return False
        if self._failing:
            log.info("%s: resume record stored on replay again", self.label)
        self._failing = False
        return True

    def read(self, schema: Schema) -> dict[str, np.ndarray] | None:
        """The stored record (checked by :func:`decode`), or None when there is none (a new run) or another run's.

        Raises:
            RunStateError: The server has no table for this label, or the record does not fit ``schema``.
            ReplayConnectionError: A sample that did not complete in time (or another of ``REPLAY_ERRORS``).
        """
        with replay_call():
            info = self._client.server_info(timeout=int(READ_TIMEOUT_S))
        if self.table not in info:
            raise RunStateError(
                f"replay has no table {self.table} for {self.label}'s resume record: it was started with a config "
                "without this role (a lower actor.num_actors: give replay the actors' actor.num_actors) or by "
                "another ActorQ version; start replay with this run's config and version"
            )
        if int(info[self.table].current_size) == 0:
            return None
        return decode(self._sample(), self.run_id, schema, f"replay table {self.table}")

    def resume(self, schema: Schema, budget_s: float) -> dict[str, np.ndarray] | None:
        """:meth:`read`, retried with back-off while replay is away, for at most ``budget_s`` seconds.

        Raises:
            ReplayUnreachableError: Replay did not answer within the budget.
            RunStateError: As :meth:`read`.
        """
        outage = ReplayOutage(f"{self.label} resume record", budget_s=budget_s)
        while True:
            answered, record = outage.attempt(lambda: self.read(schema))
            if answered:
                if record is not None:
                    log.info("%s: resuming from its record on replay", self.label)
                return record

    def _sample(self) -> list[np.ndarray]:
        """Sample the record on a helper thread, waiting at most :data:`READ_TIMEOUT_S` (Reverb's sample has no
        deadline; a server gone between ``server_info`` and the sample would block the role's start)."""
        result: list = []
        done = threading.Event()

        def sample() -> None:
            try:
                with replay_call():
                    item = next(self._client.sample(self.table, num_samples=1, emit_timesteps=False))
                result.append(list(item.data))
            except Exception as exc:  # noqa: BLE001  (thread boundary: handed to the caller, who raises it)
                result.append(exc)
            finally:
                done.set()

        threading.Thread(target=sample, name=f"read-{self.table}", daemon=True).start()
        if not done.wait(READ_TIMEOUT_S):
            raise ReplayConnectionError(f"reading {self.table} did not complete within {READ_TIMEOUT_S:.0f}s")
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]
