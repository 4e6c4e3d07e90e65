"""A role's resume record as plain numpy columns, signed with the run's key, and the bounds its values keep.

Anyone who reaches the replay port can write a run-state table (Reverb has no authentication), and the run id is
public (it is in clear in every signed message). So a record is trusted only once its tag verifies: an HMAC-SHA256
under the run-state key derived from the run's weights key (:data:`actorq.quantize.signing.RUN_STATE_STREAM`),
over the record's format, the role label it belongs to, the run id, and every field's name, dtype, shape and bytes.
A record copied from another label, another run or another format does not verify. Then every value must be in its
field's range (:class:`Field`): counters below :data:`~actorq.status.COUNTER_LIMIT`, returns finite and within
:data:`~actorq.status.RETURN_LIMIT`, histories no longer than a field allows.

Columns: ``int64[1]`` the format (:data:`RUN_STATE_FORMAT`), ``uint8[n]`` the run id (hex, ``unsigned`` without a
key), ``uint8[m]`` the field names (comma-separated, in order), one column per field, and ``uint8[32]`` the tag
(``uint8[0]`` in a run without a key, whose records are only bounded: ``--insecure-weights``).

Whatever :func:`decode` is given (any number of columns of any dtype or shape) it either returns the fields or
raises :class:`RejectedRecordError`; nothing else.
"""

from __future__ import annotations

import hmac
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from actorq.errors import ActorQError
from actorq.quantize.signing import RUN_STATE_STREAM, TAG_BYTES, WeightsKey, sign

RUN_STATE_FORMAT = 2
"""The record layout of the module docstring (format 1 had no tag)."""
UNSIGNED_RUN = "unsigned"
"""The run id of records written without a weights key (``--insecure-weights``)."""
MAX_TEXT = 4096
"""The most bytes a record's run id or field names may take."""
_DOMAIN = b"actorq run state record\0"


class RejectedRecordError(ActorQError, ValueError):
    """A resume record the role does not trust: unsigned or forged, another run's or another role's, not the
    layout this version writes, or a value out of range. Logged and counted; the role starts from what it trusts."""


@dataclass(frozen=True)
class Field:
    """One field of a role's record: its dtype, rank and the range every value must be in."""

    dtype: type
    """numpy dtype (int64 or float64)."""
    ndim: int
    """0 (a scalar) or 1 (one entry per event, e.g. per evaluation)."""
    low: float
    """Smallest allowed value."""
    high: float
    """Values must be below this (strictly)."""
    max_len: int = 0
    """The most entries of a 1-D field."""


Schema = Mapping[str, Field]
"""A role's record fields, name -> :class:`Field`, in the order they are stored."""


def _chunk(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def _column_bytes(column: np.ndarray) -> bytes:
    """A column as the tag covers it: dtype, shape, then its bytes (little-endian, C order)."""
    dtype = column.dtype.newbyteorder("<") if column.dtype.byteorder == ">" else column.dtype
    shape = struct.pack(f"<{column.ndim + 1}Q", column.ndim, *column.shape)
    return _chunk(dtype.str.encode()) + shape + _chunk(np.ascontiguousarray(column, dtype).tobytes())


def _tag(key: WeightsKey, label: str, columns: Sequence[np.ndarray]) -> bytes:
    parts = [_DOMAIN, _chunk(label.encode())]
    parts += [_column_bytes(c) for c in columns]
    return sign(key, RUN_STATE_STREAM, b"".join(parts))


def run_id_of(key: WeightsKey | None) -> str:
    """The run id a record names: the key's hex fingerprint, or :data:`UNSIGNED_RUN`."""
    return key.run_id_hex if key is not None else UNSIGNED_RUN


def encode(label: str, key: WeightsKey | None, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The Reverb columns of ``label``'s record of ``values`` (signed with ``key``; see the module docstring)."""
    columns = [
        np.array([RUN_STATE_FORMAT], dtype=np.int64),
        np.frombuffer(run_id_of(key).encode(), dtype=np.uint8),
        np.frombuffer(",".join(values).encode(), dtype=np.uint8),
        *(np.asarray(v) for v in values.values()),
    ]
    tag = b"" if key is None else _tag(key, label, columns)
    return [*columns, np.frombuffer(tag, dtype=np.uint8).copy()]


def _text(column: np.ndarray, what: str) -> str:
    if column.dtype != np.uint8 or column.ndim != 1 or column.size > MAX_TEXT:
        raise RejectedRecordError(
            f"its {what} is not a short uint8 text column ({column.dtype}{list(column.shape)})"
        )
    return bytes(column).decode("utf-8", errors="replace")


def decode(
    columns: Sequence[object], label: str, key: WeightsKey | None, schema: Schema
) -> dict[str, np.ndarray]:
    """The fields of ``label``'s record, verified (with ``key``) and within ``schema``'s bounds.

    Raises:
        RejectedRecordError: Anything else, naming what is wrong.
    """
    if not isinstance(columns, (list, tuple)) or not all(
        isinstance(c, (np.ndarray, np.generic)) for c in columns
    ):
        raise RejectedRecordError("not a list of numpy columns")
    columns = [np.asarray(c) for c in columns]
    if len(columns) != 4 + len(schema):
        raise RejectedRecordError(f"{len(columns)} columns; this role's record has {4 + len(schema)}")
    if any(c.dtype.kind not in "biuf" for c in columns):
        raise RejectedRecordError("a column is not numeric")
    header, run_id, names, *fields, tag = columns
    if header.dtype != np.int64 or header.shape != (1,) or int(header[0]) != RUN_STATE_FORMAT:
        raise RejectedRecordError(f"not a run-state record of format {RUN_STATE_FORMAT}")
    written_by = _text(run_id, "run id")
    if written_by != run_id_of(key):
        raise RejectedRecordError(
            f"it names run {written_by}, this run is {run_id_of(key)}: another run's record (a replay checkpoint "
            "of another run) or forged"
        )
    if key is not None:
        if tag.dtype != np.uint8 or tag.shape != (TAG_BYTES,):
            raise RejectedRecordError("it carries no run-state signature: forged, or written without the key")
        if not hmac.compare_digest(_tag(key, label, columns[:-1]), bytes(tag)):
            raise RejectedRecordError(
                f"its signature does not match this run's key for {label}: forged, corrupted, or copied from "
                "another role's table"
            )
    got = _text(names, "field names").split(",")
    if got != list(schema):
        raise RejectedRecordError(f"fields {got}, this role's are {list(schema)} (another ActorQ version?)")
    return check_fields(dict(zip(got, fields, strict=True)), schema)


def check_fields(fields: Mapping[str, np.ndarray], schema: Schema) -> dict[str, np.ndarray]:
    """``fields`` when each has its :class:`Field`'s dtype, rank, length and range (the record's and a local
    copy's rule).

    Raises:
        RejectedRecordError: Naming the first field that does not.
    """
    out = {}
    for name, spec in schema.items():
        value = np.asarray(fields[name]) if name in fields else None
        if value is None or value.dtype != np.dtype(spec.dtype) or value.ndim != spec.ndim:
            what = "missing" if value is None else f"{value.dtype}[{value.ndim}-d]"
            raise RejectedRecordError(
                f"field {name} is {what}, expected {np.dtype(spec.dtype)}[{spec.ndim}-d]"
            )
        if spec.ndim and value.size > spec.max_len:
            raise RejectedRecordError(f"field {name} has {value.size} entries, at most {spec.max_len}")
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(value) & (value >= spec.low) & (value < spec.high))
        if bad.any():
            raise RejectedRecordError(
                f"field {name} holds {value[bad].reshape(-1)[0]!r}, outside [{spec.low:g}, {spec.high:g})"
            )
        out[name] = value
    return out
