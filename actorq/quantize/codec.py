"""Versioned, self-describing weight message: how the learner's weights travel to actors over Reverb.

Wire layout (all integers little-endian)::

    offset 0   b"AQWM"                      magic
           4   u16  format version          MESSAGE_VERSION
           6   u32  header length H         JSON bytes, space-padded so the payload starts 8-aligned
          10   u64  stored payload length P bytes on the wire (after zlib when compressed)
          18   header JSON, utf-8           learner_step, version, precision, comm_bits, compressed,
                                            payload_nbytes (uncompressed), tensors: [{name, shape,
                                            encoding, bits, axis, scale: [off, len] | null,
                                            data: [off, len]}], offsets relative to the uncompressed payload
      18 + H   payload (P bytes)            segments 8-aligned; zlib stream of the whole when compressed
  18 + H + P   u32  crc32 of every byte before it

Encodings: ``f32`` ('<f4'), ``f16`` ('<f2'), ``q`` symmetric affine codes ``q = clamp(rint(x / s), -m, m)``
with ``m = 2^(b-1) - 1``, stored as ``u = q + m`` in ``[0, 2m]`` and bit-packed (see ``packing``); the
scale segment holds float32 ``s`` per output row (axis 0) or one per tensor. ``x^ = s * q``.

Nothing is unpickled or evaluated: the header goes through ``json.loads`` only and arrays are read with
``np.frombuffer``. Decoding checks, in order, and raises:
  * fewer bytes than the fixed preamble or than its declared lengths -> TruncatedMessageError;
  * wrong magic -> MalformedMessageError (it is not an ActorQ message at all; a flipped length field
    also lands here or in TruncatedMessageError, since lengths are checked before the crc);
  * unknown format version -> UnsupportedVersionError; crc32 mismatch -> ChecksumMismatchError;
  * any header inconsistency -> MalformedMessageError; names/shapes against ``expected`` ->
    UnknownTensorError, MissingTensorError, ShapeMismatchError (before any decompression);
  * NaN/Inf in values or scales -> NonFiniteWeightsError.
Decompression is bounded by the declared size, so a zip bomb can't allocate more than it claims, and
the claim itself is capped by MAX_PAYLOAD_BYTES and by deflate's maximum ratio. Encoding refuses NaN/Inf
(and fp16 overflow) with NonFiniteWeightsError, so a diverged learner is reported at the source.

Decoded f32/f16 arrays are zero-copy views into the message buffer: read-only for ``bytes``; for a
writable buffer they alias it, so copy before mutating either.
"""

from __future__ import annotations

import json
import logging
import math
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from actorq.quantize.affine import qrange, quantize_tensor
from actorq.quantize.floats import to_fp16
from actorq.quantize.message import (  # re-exported: the codec's public names
    ChecksumMismatchError,
    EncodedTensor,
    MalformedMessageError,
    MessageHeader,
    MissingTensorError,
    NonFiniteWeightsError,
    ShapeMismatchError,
    TruncatedMessageError,
    UnknownTensorError,
    UnsupportedVersionError,
    WeightMessage,
    WeightMessageError,
)
from actorq.quantize.packing import pack_bits, packed_nbytes, unpack_bits

logger = logging.getLogger(__name__)

__all__ = [
    "ChecksumMismatchError",
    "EncodedTensor",
    "MESSAGE_VERSION",
    "MalformedMessageError",
    "MessageHeader",
    "MissingTensorError",
    "NonFiniteWeightsError",
    "ShapeMismatchError",
    "TruncatedMessageError",
    "UnknownTensorError",
    "UnsupportedVersionError",
    "WeightMessage",
    "WeightMessageError",
    "decode_message",
    "encode_message",
    "read_header",
]

MESSAGE_VERSION = 1
MAGIC = b"AQWM"
COMM_BITS = (2, 3, 4, 5, 6, 7, 8, 16, 32)
MAX_PAYLOAD_BYTES = 1 << 32  # cap on the declared uncompressed payload (4 GiB)
ZLIB_LEVEL = 1  # weights are high-entropy: level 1 gets nearly all of level 6's gain, several times faster
_PRE = struct.Struct("<4sHIQ")
_CRC = struct.Struct("<I")
_ALIGN = 8
_MAX_NDIM = 32
_MAX_NAME = 1024
_MAX_META_INT = 1 << 63
_DEFLATE_MAX_RATIO = 1100  # deflate can't expand more than ~1032x
_META_KEYS = {"learner_step", "version", "precision", "comm_bits"}
_HEADER_KEYS = _META_KEYS | {"compressed", "payload_nbytes", "tensors"}
_TENSOR_KEYS = {"name", "shape", "encoding", "bits", "axis", "scale", "data"}
_FLOAT_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _check_meta(version: Any, learner_step: Any, precision: Any, comm_bits: Any) -> None:
    for field, v in (("version", version), ("learner_step", learner_step)):
        if not _is_int(v) or not 0 <= v < _MAX_META_INT:
            raise ValueError(f"{field} must be an int in [0, 2^63), got {v!r}")
    if not isinstance(precision, str) or not 0 < len(precision) <= 64:
        raise ValueError(f"precision must be a non-empty str of at most 64 chars, got {precision!r}")
    if not _is_int(comm_bits) or comm_bits not in COMM_BITS:
        raise ValueError(f"comm_bits must be one of {COMM_BITS}, got {comm_bits!r}")


def _finite_or_raise(a: np.ndarray, what: str) -> None:
    if not np.isfinite(a).all():
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        raise NonFiniteWeightsError(f"{what} contains {nan} NaN and {inf} Inf values")


def encode_message(
    state: Mapping[str, np.ndarray],
    *,
    version: int,
    learner_step: int,
    precision: str,
    comm_bits: int,
    compress: bool = False,
    per_channel: bool = True,
) -> np.ndarray:
    """Serialise a weight state into one uint8 array (the layout is in the module docstring).

    Args:
        state: ``{name: array}``; tensors with ndim >= 2 use the ``comm_bits`` encoding, the rest go as
            f32 (f16 when ``comm_bits == 16``).
        version: Weight version (the learner's publication counter), >= 0.
        learner_step: Learner step the weights come from, >= 0.
        precision: The actors' inference precision (e.g. "fp32", "int8"), carried verbatim.
        comm_bits: 32 (f32), 16 (f16) or 2..8 (symmetric affine codes, bit-packed).
        compress: zlib the whole payload.
        per_channel: One scale per output row (axis 0) instead of one per tensor.

    Returns:
        1-D uint8 array.

    Raises:
        NonFiniteWeightsError: NaN/Inf in a tensor, or a value beyond fp16 range when ``comm_bits == 16``.
        ValueError, TypeError: Bad metadata, names or dtypes.
    """
    _check_meta(version, learner_step, precision, comm_bits)
    records: list[dict[str, Any]] = []
    segments: list[tuple[int, np.ndarray]] = []
    end = 0

    def place(arr: np.ndarray) -> list[int]:
        nonlocal end
        start = _align(end)
        raw = arr.reshape(-1).view(np.uint8)
        segments.append((start, raw))
        end = start + raw.size
        return [start, int(raw.size)]

    for name, value in state.items():
        if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME:
            raise ValueError(f"tensor names must be non-empty str of at most {_MAX_NAME} chars, got {name!r}")
        x = np.asarray(value)
        if x.dtype.kind not in "fiu" or x.ndim > _MAX_NDIM:
            raise TypeError(f"tensor {name!r}: expected a real array of ndim <= {_MAX_NDIM}, got {x.dtype}")
        with np.errstate(over="ignore"):
            x32 = np.ascontiguousarray(x, dtype="<f4")
        _finite_or_raise(x32, f"tensor {name!r} (as float32)")
        rec: dict[str, Any] = {"name": name, "shape": list(x.shape), "axis": None, "scale": None}
        if x.ndim >= 2 and comm_bits <= 8:
            codes, qp = quantize_tensor(x32, comm_bits, symmetric=True, axis=0 if per_channel else None)
            qmax = qp.qmax
            u = codes.view(np.uint8) + np.uint8(qmax)  # q + m in [0, 2m]; uint8 wrap-around is intended
            rec.update(encoding="q", bits=comm_bits, axis=qp.axis)
            rec["scale"] = place(qp.scale.astype("<f4"))
            rec["data"] = place(u if comm_bits == 8 else pack_bits(u, comm_bits))
        elif comm_bits == 16:
            h = to_fp16(x32)
            _finite_or_raise(h, f"tensor {name!r} (as float16; |x| > 65504 overflows)")
            rec.update(encoding="f16", bits=16, data=place(h.astype("<f2", copy=False)))
        else:
            rec.update(encoding="f32", bits=32, data=place(x32))
        records.append(rec)

    header = dict(learner_step=int(learner_step), version=int(version), precision=precision)
    header.update(comm_bits=int(comm_bits), compressed=bool(compress), payload_nbytes=end, tensors=records)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (_align(_PRE.size + len(hjson)) - _PRE.size - len(hjson))
    body_at = _PRE.size + len(hjson)
    if compress:
        raw = np.zeros(end, np.uint8)
        for start, seg in segments:
            raw[start : start + seg.size] = seg
        stored = np.frombuffer(zlib.compress(raw, ZLIB_LEVEL), np.uint8)
        segments, plen = [(0, stored)], stored.size
    else:
        plen = end
    out = np.zeros(body_at + plen + _CRC.size, np.uint8)
    _PRE.pack_into(out, 0, MAGIC, MESSAGE_VERSION, len(hjson), plen)
    out[_PRE.size : body_at] = np.frombuffer(hjson, np.uint8)
    for start, seg in segments:
        out[body_at + start : body_at + start + seg.size] = seg
    _CRC.pack_into(out, out.size - _CRC.size, zlib.crc32(out[: -_CRC.size]))
    logger.debug("encoded %d tensors, comm_bits=%d: %d bytes", len(records), comm_bits, out.size)
    return out


def _as_view(buf: Any) -> memoryview:
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8:
            raise TypeError(f"expected a uint8 array, got dtype {buf.dtype}")
        buf = np.ascontiguousarray(buf).reshape(-1)
    elif not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, bytearray, memoryview or uint8 ndarray, got {type(buf).__name__}")
    mv = memoryview(buf)
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    return mv.cast("B") if (mv.format != "B" or mv.ndim != 1) else mv


def _segment(v: Any, what: str, itemsize: int) -> tuple[int, int]:
    if not (isinstance(v, list) and len(v) == 2 and all(_is_int(i) and i >= 0 for i in v)):
        raise MalformedMessageError(f"{what} must be [offset, length] of non-negative ints, got {v!r}")
    if v[0] % itemsize:
        raise MalformedMessageError(f"{what} offset {v[0]} is not {itemsize}-byte aligned")
    return int(v[0]), int(v[1])


def _check_record(t: Any, seen: set[str]) -> dict[str, Any]:
    if not isinstance(t, dict) or set(t) != _TENSOR_KEYS:
        raise MalformedMessageError(f"tensor record must be an object with keys {sorted(_TENSOR_KEYS)}")
    name, shape, enc, bits, axis = t["name"], t["shape"], t["encoding"], t["bits"], t["axis"]
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME or name in seen:
        raise MalformedMessageError(f"tensor name {name!r} is not a valid, unique name")
    seen.add(name)
    if not (
        isinstance(shape, list) and len(shape) <= _MAX_NDIM and all(_is_int(d) and d >= 0 for d in shape)
    ):
        raise MalformedMessageError(f"tensor {name!r}: shape {shape!r} is not a list of non-negative ints")
    count = math.prod(shape)
    if enc not in ("f32", "f16", "q"):
        raise MalformedMessageError(f"tensor {name!r}: unknown encoding {enc!r}")
    if not _is_int(bits) or (enc == "q" and not 2 <= bits <= 8) or (enc != "q" and bits != int(enc[1:])):
        raise MalformedMessageError(f"tensor {name!r}: bits {bits!r} out of range for encoding {enc!r}")
    out = {"name": name, "shape": tuple(int(d) for d in shape), "encoding": enc, "bits": int(bits)}
    out["axis"], out["scale"] = None, None
    if enc == "q":
        if axis is not None and not (_is_int(axis) and 0 <= axis < len(shape)):
            raise MalformedMessageError(f"tensor {name!r}: axis {axis!r} invalid for shape {tuple(shape)}")
        out["axis"] = None if axis is None else int(axis)
        nchan = 1 if axis is None else shape[axis]
        out["scale"] = _segment(t["scale"], f"tensor {name!r} scale segment", 4)
        if out["scale"][1] != 4 * nchan:
            raise MalformedMessageError(f"tensor {name!r}: scale segment is not {4 * nchan} bytes")
        need = packed_nbytes(count, bits)
        out["data"] = _segment(t["data"], f"tensor {name!r} data segment", 1)
    else:
        if axis is not None or t["scale"] is not None:
            raise MalformedMessageError(f"tensor {name!r}: {enc} tensors take no axis or scale")
        need = count * (bits // 8)
        out["data"] = _segment(t["data"], f"tensor {name!r} data segment", bits // 8)
    if out["data"][1] != need:
        raise MalformedMessageError(f"tensor {name!r}: {out['data'][1]} data bytes, shape needs {need}")
    return out


def _check_header(h: Any, plen: int) -> dict[str, Any]:
    if not isinstance(h, dict) or set(h) != _HEADER_KEYS:
        raise MalformedMessageError(f"header must be a JSON object with keys {sorted(_HEADER_KEYS)}")
    try:
        _check_meta(h["version"], h["learner_step"], h["precision"], h["comm_bits"])
    except ValueError as e:
        raise MalformedMessageError(f"header: {e}") from None
    raw, comp = h["payload_nbytes"], h["compressed"]
    if not isinstance(comp, bool) or not _is_int(raw) or raw < 0:
        raise MalformedMessageError("header: compressed must be a bool and payload_nbytes an int >= 0")
    if not comp and raw != plen:
        raise MalformedMessageError(f"header declares {raw} payload bytes but the message carries {plen}")
    if comp and (raw > MAX_PAYLOAD_BYTES or raw > plen * _DEFLATE_MAX_RATIO + 1024):
        raise MalformedMessageError(f"declared payload of {raw} bytes is implausible for {plen} compressed")
    if not isinstance(h["tensors"], list):
        raise MalformedMessageError("header: tensors must be a list")
    seen: set[str] = set()
    recs = [_check_record(t, seen) for t in h["tensors"]]
    spans = sorted(s for r in recs for s in (r["scale"], r["data"]) if s is not None)
    pos = 0
    for off, n in spans:
        if off < pos:
            raise MalformedMessageError(f"payload segments overlap at byte {off}")
        pos = off + n
    if pos != raw:
        raise MalformedMessageError(f"segments end at byte {pos} but the payload has {raw} bytes")
    return {**h, "tensors": recs}


def _no_nan(c: str) -> None:
    raise ValueError(f"{c} is not valid JSON")


def _parse(buf: Any) -> tuple[memoryview, dict[str, Any], int, int]:
    """Integrity checks and header validation; returns (view, header, payload start, stored length)."""
    mv = _as_view(buf)
    if len(mv) < _PRE.size + _CRC.size:
        raise TruncatedMessageError(f"message is {len(mv)} bytes; the smallest valid one is {_PRE.size + 4}")
    magic, fver, hlen, plen = _PRE.unpack_from(mv, 0)
    if magic != MAGIC:
        raise MalformedMessageError(f"not an ActorQ weight message (magic {bytes(magic)!r})")
    if fver != MESSAGE_VERSION:
        raise UnsupportedVersionError(f"message format version {fver}; this build reads {MESSAGE_VERSION}")
    total = _PRE.size + hlen + plen + _CRC.size
    if len(mv) < total:
        raise TruncatedMessageError(f"message is {len(mv)} bytes but its preamble declares {total}")
    if len(mv) > total:
        raise MalformedMessageError(f"{len(mv) - total} unexpected bytes after the {total}-byte message")
    (crc,) = _CRC.unpack_from(mv, total - _CRC.size)
    actual = zlib.crc32(mv[: total - _CRC.size])
    if crc != actual:
        raise ChecksumMismatchError(f"crc32 is {actual:#010x} but the message says {crc:#010x}: corrupted")

    try:
        header = json.loads(bytes(mv[_PRE.size : _PRE.size + hlen]).decode("utf-8"), parse_constant=_no_nan)
    except (ValueError, RecursionError) as e:
        raise MalformedMessageError(f"header is not valid utf-8 JSON: {e}") from None
    return mv, _check_header(header, plen), _PRE.size + hlen, plen


def read_header(buf: Any) -> MessageHeader:
    """Metadata of a message after the integrity and header checks, without decoding the payload.

    Raises the same errors as :func:`decode_message` up to (not including) the ``expected`` checks.
    """
    mv, h, _, _ = _parse(buf)
    meta = (h["version"], h["learner_step"], h["precision"], h["comm_bits"], h["compressed"])
    return MessageHeader(MESSAGE_VERSION, *meta, num_tensors=len(h["tensors"]), nbytes=len(mv))


def _check_expected(recs: list[dict[str, Any]], expected: Mapping[str, tuple[int, ...]]) -> None:
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


def _inflate(data: memoryview, size: int) -> memoryview:
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, max(size, 1))  # max_length=0 would mean unlimited
        extra = d.decompress(d.unconsumed_tail, 1) if not d.eof else b""
    except zlib.error as e:
        raise MalformedMessageError(f"compressed payload is corrupt: {e}") from None
    if len(out) != size or extra or not d.eof or d.unused_data:
        raise MalformedMessageError(f"compressed payload does not inflate to the declared {size} bytes")
    return memoryview(out)


def _decode_tensor(payload: memoryview, r: dict[str, Any]) -> EncodedTensor:
    name, shape, enc, bits = r["name"], r["shape"], r["encoding"], r["bits"]
    count = math.prod(shape)
    off, n = r["data"]
    if enc != "q":
        data = np.frombuffer(payload, _FLOAT_DTYPES[enc], count, off).reshape(shape)
        _finite_or_raise(data, f"tensor {name!r}")
        return EncodedTensor(name, shape, enc, data, bits)
    qmax = qrange(bits, True)[1]
    soff, sn = r["scale"]
    scale = np.frombuffer(payload, "<f4", sn // 4, soff).astype(np.float32)
    _finite_or_raise(scale, f"tensor {name!r} scales")
    if scale.size and scale.min() <= 0:
        raise MalformedMessageError(f"tensor {name!r}: scale {float(scale.min())} is not positive")
    codes = unpack_bits(np.frombuffer(payload, np.uint8, n, off), bits, count)
    if codes.size and codes.max() > 2 * qmax:
        raise MalformedMessageError(f"tensor {name!r}: a code is outside [-{qmax}, {qmax}]")
    codes -= np.uint8(qmax)  # u - m, wrapping in uint8, is q in two's complement
    axis = r["axis"]
    scale = scale.reshape(()) if axis is None else scale
    zero = np.zeros(scale.shape, np.int32)
    t = EncodedTensor(name, shape, "q", codes.view(np.int8).reshape(shape), bits, scale, zero, axis)
    # s * q could still overflow float32; the cheap bound settles it unless scales are astronomically large.
    with np.errstate(over="ignore"):
        if scale.size and not np.isfinite(np.float32(scale.max()) * np.float32(qmax)):
            _finite_or_raise(t.to_float32(), f"tensor {name!r} (dequantized)")
    return t


def decode_message(buf: Any, expected: Mapping[str, tuple[int, ...]] | None = None) -> WeightMessage:
    """Validate and decode a message produced by :func:`encode_message`.

    Args:
        buf: bytes, bytearray, memoryview or uint8 ndarray.
        expected: Optional ``{name: shape}`` of the receiving network; names and shapes must match exactly.

    Returns:
        The WeightMessage (f32/f16 data are views into ``buf``; see the module docstring).

    Raises:
        WeightMessageError: The subclass names what is wrong (see the module docstring).
        TypeError: ``buf`` is not one of the accepted types.
    """
    mv, h, start, plen = _parse(buf)
    if expected is not None:
        _check_expected(h["tensors"], expected)
    body = mv[start : start + plen]
    payload = _inflate(body, h["payload_nbytes"]) if h["compressed"] else body
    tensors = {r["name"]: _decode_tensor(payload, r) for r in h["tensors"]}
    meta = (h["version"], h["learner_step"], h["precision"], h["comm_bits"])
    return WeightMessage(*meta, tensors=tensors, nbytes=len(mv))
