"""Versioned, self-describing, signed weight message: how the learner's weights travel to actors over Reverb.

The wire layout (format 2), the encodings and the order of decoding's checks, each with the error it raises, are in
docs/weight-message.md. Nothing is unpickled or evaluated: the header goes through ``json.loads`` only and arrays
are read with ``np.frombuffer``; the receiver's byte cap is checked before anything else reads the bytes, and with
a ``key`` the HMAC tag is verified before anything an attacker wrote is parsed. Decoded f32/f16 arrays are
zero-copy views into the message buffer: read-only for ``bytes``; for a writable buffer they alias it, so copy
before mutating either.
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
from actorq.quantize.header import (
    ALIGN,
    MAX_NAME,
    MAX_NDIM,
    MAX_PAYLOAD_BYTES,
    check_expected,
    check_header,
    check_meta,
    finite_or_raise,
)
from actorq.quantize.message import (  # re-exported: the codec's public names
    ChecksumMismatchError,
    EncodedTensor,
    LegacyUnsignedMessageError,
    MalformedMessageError,
    MessageHeader,
    MissingTensorError,
    NonFiniteWeightsError,
    ShapeMismatchError,
    TruncatedMessageError,
    UnauthenticatedMessageError,
    UnknownTensorError,
    UnsupportedVersionError,
    WeightMessage,
    WeightMessageError,
)
from actorq.quantize.packing import pack_bits, unpack_bits
from actorq.quantize.signing import POLICY_STREAM, RUN_ID_BYTES, TAG_BYTES, WeightsKey, sign, verify

logger = logging.getLogger(__name__)

__all__ = [
    "ChecksumMismatchError",
    "AUTH_HMAC_SHA256",
    "AUTH_NONE",
    "EncodedTensor",
    "LegacyUnsignedMessageError",
    "MESSAGE_VERSION",
    "MalformedMessageError",
    "MessageHeader",
    "MissingTensorError",
    "NonFiniteWeightsError",
    "ShapeMismatchError",
    "TruncatedMessageError",
    "UnauthenticatedMessageError",
    "UnknownTensorError",
    "UnsupportedVersionError",
    "WeightMessage",
    "WeightMessageError",
    "decode_message",
    "encode_message",
    "read_header",
]

MESSAGE_VERSION = 2
UNSIGNED_VERSION = 1  # the format before signing: rejected with LegacyUnsignedMessageError
AUTH_NONE = 0
AUTH_HMAC_SHA256 = 1
MAGIC = b"AQWM"
ZLIB_LEVEL = 1  # weights are high-entropy: level 1 gets nearly all of level 6's gain, several times faster
_MAGIC_VERSION = struct.Struct("<4sH")
_PRE = struct.Struct(f"<4sHH{RUN_ID_BYTES}sIQ")
_CRC = struct.Struct("<I")
_ALIGN = ALIGN
MAX_MESSAGE_BYTES = MAX_PAYLOAD_BYTES + (64 << 20)
"""The largest message any reader accepts (the largest payload plus room for a header): checked, like a
receiver's own tighter ``max_bytes`` (:func:`message_size_bound`), before the HMAC runs over the bytes."""
_FLOAT_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def encode_message(
    state: Mapping[str, np.ndarray],
    *,
    version: int,
    learner_step: int,
    precision: str,
    comm_bits: int,
    compress: bool = False,
    per_channel: bool = True,
    key: WeightsKey | None = None,
    stream: str = POLICY_STREAM,
) -> np.ndarray:
    """Serialise a weight state into one uint8 array (the layout is in the module docstring).

    Args:
        state: ``{name: array}``; tensors with ndim >= 2 use the ``comm_bits`` encoding, the rest go as
            f32 (f16 when ``comm_bits == 16``).
        version: Weight version (the learner's: its step plus an offset; the policy's: that + 1), >= 0.
        learner_step: Learner step the weights come from, >= 0.
        precision: The actors' inference precision (e.g. "fp32", "int8"), carried verbatim.
        comm_bits: 32 (f32), 16 (f16) or 2..8 (symmetric affine codes, bit-packed).
        compress: zlib the whole payload.
        per_channel: One scale per output row (axis 0) instead of one per tensor.
        key: The run's weights key: sign the message (HMAC-SHA256 tag, run id in the preamble). None writes an
            unsigned message, which only readers without a key (``--insecure-weights`` runs) accept.
        stream: Which stream the message is for (``signing.POLICY_STREAM`` or ``LEARNER_STREAM``); a signed
            message only verifies for the stream it was signed for.

    Returns:
        1-D uint8 array.

    Raises:
        NonFiniteWeightsError: NaN/Inf in a tensor, or a value beyond fp16 range when ``comm_bits == 16``.
        ValueError, TypeError: Bad metadata, names or dtypes.
    """
    check_meta(version, learner_step, precision, comm_bits)
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
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise ValueError(f"tensor names must be non-empty str of at most {MAX_NAME} chars, got {name!r}")
        x = np.asarray(value)
        if x.dtype.kind not in "fiu" or x.ndim > MAX_NDIM:
            raise TypeError(f"tensor {name!r}: expected a real array of ndim <= {MAX_NDIM}, got {x.dtype}")
        with np.errstate(over="ignore"):
            x32 = np.ascontiguousarray(x, dtype="<f4")
        finite_or_raise(x32, f"tensor {name!r} (as float32)")
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
            finite_or_raise(h, f"tensor {name!r} (as float16; |x| > 65504 overflows)")
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
    crc_at = body_at + plen
    out = np.zeros(crc_at + _CRC.size + (TAG_BYTES if key is not None else 0), np.uint8)
    auth, run_id = (AUTH_NONE, bytes(RUN_ID_BYTES)) if key is None else (AUTH_HMAC_SHA256, key.run_id)
    _PRE.pack_into(out, 0, MAGIC, MESSAGE_VERSION, auth, run_id, len(hjson), plen)
    out[_PRE.size : body_at] = np.frombuffer(hjson, np.uint8)
    for start, seg in segments:
        out[body_at + start : body_at + start + seg.size] = seg
    _CRC.pack_into(out, crc_at, zlib.crc32(out[:crc_at]))
    if key is not None:
        tag_at = crc_at + _CRC.size
        out[tag_at:] = np.frombuffer(sign(key, stream, out[:tag_at]), np.uint8)
    logger.debug("encoded %d tensors, comm_bits=%d: %d bytes", len(records), comm_bits, out.size)
    return out


def message_size_bound(shapes: Mapping[str, tuple[int, ...]]) -> int:
    """The most bytes a message carrying tensors of ``shapes`` can take (uncompressed fp32, the widest encoding,
    with the longest header a sender could write): a receiver that knows its network caps messages at this."""
    header = 1024 + sum(6 * len(name) + 256 + 24 * len(shape) for name, shape in shapes.items())
    payload = sum(
        _align(4 * math.prod(shape)) + _align(4 * (shape[0] if shape else 1)) for shape in shapes.values()
    )
    return _PRE.size + _align(header) + payload + _CRC.size + TAG_BYTES


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


def _no_nan(c: str) -> None:
    raise ValueError(f"{c} is not valid JSON")


def _authenticate(mv: memoryview, auth: int, run_id: bytes, key: WeightsKey, stream: str) -> None:
    """Raise UnauthenticatedMessageError unless ``mv`` is signed for ``stream`` with ``key``: done on the raw
    bytes, before any length, header or payload the sender wrote is interpreted."""
    if auth != AUTH_HMAC_SHA256:
        raise UnauthenticatedMessageError(
            f"the message is unsigned (auth {auth}) but this run requires weights signed with its key "
            f"(run {key.run_id_hex}): forged, or from a quantizer/learner started with --insecure-weights"
        )
    if run_id != key.run_id:
        raise UnauthenticatedMessageError(
            f"the message names run {run_id.hex()} but this role's key is for run {key.run_id_hex}: "
            "a message from another run (check --weights-key-file), or forged"
        )
    if len(mv) < _PRE.size + _CRC.size + TAG_BYTES or not verify(
        key, stream, mv[:-TAG_BYTES], mv[-TAG_BYTES:]
    ):
        raise UnauthenticatedMessageError(
            f"the {stream} message's HMAC-SHA256 signature does not match this run's key "
            f"(run {key.run_id_hex}): forged or corrupted"
        )


def _parse(
    buf: Any, key: WeightsKey | None = None, stream: str = POLICY_STREAM, max_bytes: int | None = None
) -> tuple[memoryview, dict[str, Any], int, int, bool, bytes]:
    """Size cap, authentication (with ``key``), integrity checks and header validation; returns (view, header,
    payload start, stored length, signed, run id)."""
    mv = _as_view(buf)
    cap = MAX_MESSAGE_BYTES if max_bytes is None else min(max_bytes, MAX_MESSAGE_BYTES)
    if len(mv) > cap:
        raise MalformedMessageError(
            f"message of {len(mv)} bytes is larger than the {cap} a message for this receiver can take"
        )
    if len(mv) < _MAGIC_VERSION.size:
        raise TruncatedMessageError(f"message is {len(mv)} bytes; the smallest valid one is {_PRE.size + 4}")
    magic, fver = _MAGIC_VERSION.unpack_from(mv, 0)
    if magic != MAGIC:
        raise MalformedMessageError(f"not an ActorQ weight message (magic {bytes(magic)!r})")
    if fver == UNSIGNED_VERSION:
        raise LegacyUnsignedMessageError(
            f"message format version {fver} is unsigned (written by an ActorQ build from before weight signing); "
            f"this build reads only format {MESSAGE_VERSION}: run every role from the same build"
        )
    if fver != MESSAGE_VERSION:
        raise UnsupportedVersionError(f"message format version {fver}; this build reads {MESSAGE_VERSION}")
    if len(mv) < _PRE.size + _CRC.size:
        raise TruncatedMessageError(f"message is {len(mv)} bytes; the smallest valid one is {_PRE.size + 4}")
    _, _, auth, run_id, hlen, plen = _PRE.unpack_from(mv, 0)
    if key is not None:
        _authenticate(mv, auth, run_id, key, stream)
    if auth not in (AUTH_NONE, AUTH_HMAC_SHA256):
        raise MalformedMessageError(f"unknown auth scheme {auth}")
    total = _PRE.size + hlen + plen + _CRC.size + (TAG_BYTES if auth == AUTH_HMAC_SHA256 else 0)
    if len(mv) < total:
        raise TruncatedMessageError(f"message is {len(mv)} bytes but its preamble declares {total}")
    if len(mv) > total:
        raise MalformedMessageError(f"{len(mv) - total} unexpected bytes after the {total}-byte message")
    crc_at = _PRE.size + hlen + plen
    (crc,) = _CRC.unpack_from(mv, crc_at)
    actual = zlib.crc32(mv[:crc_at])
    if crc != actual:
        raise ChecksumMismatchError(f"crc32 is {actual:#010x} but the message says {crc:#010x}: corrupted")

    try:
        header = json.loads(bytes(mv[_PRE.size : _PRE.size + hlen]).decode("utf-8"), parse_constant=_no_nan)
    except (ValueError, RecursionError) as e:
        raise MalformedMessageError(f"header is not valid utf-8 JSON: {e}") from None
    signed = auth == AUTH_HMAC_SHA256
    return mv, check_header(header, plen), _PRE.size + hlen, plen, signed, run_id if signed else b""


def read_header(
    buf: Any, key: WeightsKey | None = None, stream: str = POLICY_STREAM, max_bytes: int | None = None
) -> MessageHeader:
    """Metadata of a message after the size cap (``max_bytes``, at most :data:`MAX_MESSAGE_BYTES`), the
    authentication (with ``key``), integrity and header checks, without decoding the payload.

    Raises the same errors as :func:`decode_message` up to (not including) the ``expected`` checks.
    """
    mv, h, _, _, signed, run_id = _parse(buf, key, stream, max_bytes)
    meta = (h["version"], h["learner_step"], h["precision"], h["comm_bits"], h["compressed"])
    return MessageHeader(
        MESSAGE_VERSION,
        *meta,
        num_tensors=len(h["tensors"]),
        nbytes=len(mv),
        signed=signed,
        run_id=run_id.hex(),
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
        finite_or_raise(data, f"tensor {name!r}")
        return EncodedTensor(name, shape, enc, data, bits)
    qmax = qrange(bits, True)[1]
    soff, sn = r["scale"]
    scale = np.frombuffer(payload, "<f4", sn // 4, soff).astype(np.float32)
    finite_or_raise(scale, f"tensor {name!r} scales")
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
            finite_or_raise(t.to_float32(), f"tensor {name!r} (dequantized)")
    return t


def decode_message(
    buf: Any,
    expected: Mapping[str, tuple[int, ...]] | None = None,
    key: WeightsKey | None = None,
    stream: str = POLICY_STREAM,
) -> WeightMessage:
    """Authenticate, validate and decode a message produced by :func:`encode_message`.

    Args:
        buf: bytes, bytearray, memoryview or uint8 ndarray.
        expected: Optional ``{name: shape}`` of the receiving network; names and shapes must match exactly.
        key: The run's weights key: the message must carry a valid tag for ``stream`` under it, checked before
            anything else. None skips authentication (``--insecure-weights`` runs, offline tools, or a buffer
            the caller already verified with :func:`read_header`).
        stream: The stream the message must have been signed for.

    Returns:
        The WeightMessage (f32/f16 data are views into ``buf``; see the module docstring).

    Raises:
        WeightMessageError: The subclass names what is wrong (see the module docstring).
        TypeError: ``buf`` is not one of the accepted types.
    """
    mv, h, start, plen, _, _ = _parse(buf, key, stream)
    if expected is not None:
        check_expected(h["tensors"], expected)
    body = mv[start : start + plen]
    payload = _inflate(body, h["payload_nbytes"]) if h["compressed"] else body
    tensors = {r["name"]: _decode_tensor(payload, r) for r in h["tensors"]}
    meta = (h["version"], h["learner_step"], h["precision"], h["comm_bits"])
    return WeightMessage(*meta, tensors=tensors, nbytes=len(mv))
