"""Validation of a weight message's metadata and JSON header (the codec's checks, kept apart from its byte
layout): every field's type and range, tensor records, payload segments, and the receiving network's names and
shapes. Each failure raises the specific :class:`~actorq.quantize.message.WeightMessageError` subclass."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from actorq.quantize.message import (
    MalformedMessageError,
    MissingTensorError,
    NonFiniteWeightsError,
    ShapeMismatchError,
    UnknownTensorError,
)
from actorq.quantize.packing import packed_nbytes

WIRE_BITS = (2, 3, 4, 5, 6, 7, 8, 16, 32)
"""Every width the codec can carry (2-8 bit packed affine codes, fp16, fp32): a message with another is refused.
A run uses one of :data:`actorq.config.COMM_BITS`, a subset."""
MAX_PAYLOAD_BYTES = 1 << 32  # cap on the declared uncompressed payload (4 GiB)
MAX_NDIM = 32
MAX_DIM = 1 << 31
"""Every dimension of a tensor is below this (a larger one is no network's, and numpy refuses some)."""
MAX_NAME = 1024
MAX_META_INT = 1 << 63
ALIGN = 8
"""Payload segments start at the next multiple of this after the previous one (the only gap allowed)."""
DEFLATE_MAX_RATIO = 1100  # deflate can't expand more than ~1032x
META_KEYS = {"learner_step", "version", "precision", "comm_bits"}
HEADER_KEYS = META_KEYS | {"compressed", "payload_nbytes", "tensors"}
TENSOR_KEYS = {"name", "shape", "encoding", "bits", "axis", "scale", "data"}


def is_int(v: Any) -> bool:
    """An int (Python or numpy), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_meta(version: Any, learner_step: Any, precision: Any, comm_bits: Any) -> None:
    """Raise ValueError unless the message metadata is in range (the encoder's and decoder's shared rules)."""
    for field, v in (("version", version), ("learner_step", learner_step)):
        if not is_int(v) or not 0 <= v < MAX_META_INT:
            raise ValueError(f"{field} must be an int in [0, 2^63), got {v!r}")
    if not isinstance(precision, str) or not 0 < len(precision) <= 64:
        raise ValueError(f"precision must be a non-empty str of at most 64 chars, got {precision!r}")
    if not is_int(comm_bits) or comm_bits not in WIRE_BITS:
        raise ValueError(f"comm_bits must be one of {WIRE_BITS}, got {comm_bits!r}")


def finite_or_raise(a: np.ndarray, what: str) -> None:
    """Raise NonFiniteWeightsError, with counts, when ``a`` holds NaN or Inf."""
    if not np.isfinite(a).all():
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        raise NonFiniteWeightsError(f"{what} contains {nan} NaN and {inf} Inf values")


def segment(v: Any, what: str, itemsize: int) -> tuple[int, int]:
    """An ``[offset, length]`` payload segment, validated, as a tuple."""
    if not (isinstance(v, list) and len(v) == 2 and all(is_int(i) and i >= 0 for i in v)):
        raise MalformedMessageError(f"{what} must be [offset, length] of non-negative ints, got {v!r}")
    if v[0] % itemsize:
        raise MalformedMessageError(f"{what} offset {v[0]} is not {itemsize}-byte aligned")
    return int(v[0]), int(v[1])


def check_record(t: Any, seen: set[str]) -> dict[str, Any]:
    """One header tensor record, validated and normalised (shape as a tuple, segments as tuples)."""
    if not isinstance(t, dict) or set(t) != TENSOR_KEYS:
        raise MalformedMessageError(f"tensor record must be an object with keys {sorted(TENSOR_KEYS)}")
    name, shape, enc, bits, axis = t["name"], t["shape"], t["encoding"], t["bits"], t["axis"]
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or name in seen:
        raise MalformedMessageError(f"tensor name {name!r} is not a valid, unique name")
    seen.add(name)
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM and all(is_int(d) and d >= 0 for d in shape)):
        raise MalformedMessageError(f"tensor {name!r}: shape {shape!r} is not a list of non-negative ints")
    if any(d >= MAX_DIM for d in shape):
        raise MalformedMessageError(f"tensor {name!r}: a dimension of shape {shape!r} is 2^31 or more")
    count = math.prod(shape)
    if enc not in ("f32", "f16", "q"):
        raise MalformedMessageError(f"tensor {name!r}: unknown encoding {enc!r}")
    if not is_int(bits) or (enc == "q" and not 2 <= bits <= 8) or (enc != "q" and bits != int(enc[1:])):
        raise MalformedMessageError(f"tensor {name!r}: bits {bits!r} out of range for encoding {enc!r}")
    out = {"name": name, "shape": tuple(int(d) for d in shape), "encoding": enc, "bits": int(bits)}
    out["axis"], out["scale"] = None, None
    if enc == "q":
        if axis is not None and not (is_int(axis) and 0 <= axis < len(shape)):
            raise MalformedMessageError(f"tensor {name!r}: axis {axis!r} invalid for shape {tuple(shape)}")
        out["axis"] = None if axis is None else int(axis)
        nchan = 1 if axis is None else shape[axis]
        out["scale"] = segment(t["scale"], f"tensor {name!r} scale segment", 4)
        if out["scale"][1] != 4 * nchan:
            raise MalformedMessageError(f"tensor {name!r}: scale segment is not {4 * nchan} bytes")
        need = packed_nbytes(count, bits)
        out["data"] = segment(t["data"], f"tensor {name!r} data segment", 1)
    else:
        if axis is not None or t["scale"] is not None:
            raise MalformedMessageError(f"tensor {name!r}: {enc} tensors take no axis or scale")
        need = count * (bits // 8)
        out["data"] = segment(t["data"], f"tensor {name!r} data segment", bits // 8)
    if out["data"][1] != need:
        raise MalformedMessageError(f"tensor {name!r}: {out['data'][1]} data bytes, shape needs {need}")
    return out


def check_header(h: Any, plen: int) -> dict[str, Any]:
    """The parsed header JSON, validated against itself and the stored payload length ``plen``."""
    if not isinstance(h, dict) or set(h) != HEADER_KEYS:
        raise MalformedMessageError(f"header must be a JSON object with keys {sorted(HEADER_KEYS)}")
    try:
        check_meta(h["version"], h["learner_step"], h["precision"], h["comm_bits"])
    except ValueError as e:
        raise MalformedMessageError(f"header: {e}") from None
    raw, comp = h["payload_nbytes"], h["compressed"]
    if not isinstance(comp, bool) or not is_int(raw) or raw < 0:
        raise MalformedMessageError("header: compressed must be a bool and payload_nbytes an int >= 0")
    if not comp and raw != plen:
        raise MalformedMessageError(f"header declares {raw} payload bytes but the message carries {plen}")
    if comp and (raw > MAX_PAYLOAD_BYTES or raw > plen * DEFLATE_MAX_RATIO + 1024):
        raise MalformedMessageError(f"declared payload of {raw} bytes is implausible for {plen} compressed")
    if not isinstance(h["tensors"], list):
        raise MalformedMessageError("header: tensors must be a list")
    seen: set[str] = set()
    recs = [check_record(t, seen) for t in h["tensors"]]
    spans = sorted(s for r in recs for s in (r["scale"], r["data"]) if s is not None)
    pos = 0
    for off, n in spans:
        if off < pos:
            raise MalformedMessageError(f"payload segments overlap at byte {off}")
        if off > -(-pos // ALIGN) * ALIGN:
            raise MalformedMessageError(f"payload segments leave a gap before byte {off} (after byte {pos})")
        pos = off + n
    if pos != raw:
        raise MalformedMessageError(f"segments end at byte {pos} but the payload has {raw} bytes")
    return {**h, "tensors": recs}


def check_expected(recs: list[dict[str, Any]], expected: Mapping[str, tuple[int, ...]]) -> None:
    """Names and shapes of ``recs`` against the receiving network's ``expected`` ``{name: shape}``."""
    names = [r["name"] for r in recs]
    unknown = [n for n in names if n not in expected]
    if unknown:
        raise UnknownTensorError(
            f"message carries tensor {unknown[0]!r} that the receiving network does not have "
            f"(it expects {sorted(expected)[:8]}{'...' if len(expected) > 8 else ''})"
        )
    have = set(names)
    missing = [n for n in expected if n not in have]
    if missing:
        raise MissingTensorError(f"the receiving network expects tensor {missing[0]!r}; the message lacks it")
    for r in recs:
        want = tuple(int(d) for d in expected[r["name"]])
        if r["shape"] != want:
            raise ShapeMismatchError(
                f"tensor {r['name']!r} has shape {r['shape']} but the receiving network expects {want}: "
                "the quantizer and actor disagree on the network architecture (e.g. network.policy_layers)"
            )
