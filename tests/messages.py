"""Crafting weight messages the way an attacker (or a buggy sender) would: read and rewrite the wire format
independently of the codec, then seal the result with a valid crc32 and, given a key, a valid HMAC tag.

The layout is restated here on purpose (format 2, see ``actorq.quantize.codec``): if the codec changes it, these
tests notice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import zlib

from actorq.quantize.signing import POLICY_STREAM, WeightsKey

PRE = struct.Struct("<4sHH8sIQ")  # magic, format version, auth, run id, header length, payload length
CRC = struct.Struct("<I")
TAG_BYTES = 32
TEST_KEY = WeightsKey(bytes(range(32)))
"""A fixed key: tests that don't care which key only need one that is the same everywhere."""


def split(msg) -> tuple[dict, bytes]:
    """(header dict, stored payload bytes) of a message."""
    b = bytes(msg)
    _, _, _, _, hlen, plen = PRE.unpack_from(b)
    return json.loads(b[PRE.size : PRE.size + hlen]), b[PRE.size + hlen : PRE.size + hlen + plen]


def seal(body: bytes, key: WeightsKey | None, stream: str = POLICY_STREAM) -> bytes:
    """``body`` (preamble + header + payload) with its crc32 and, with ``key``, an HMAC-SHA256 tag appended.

    The tag is computed here with hashlib/hmac directly (the stream key derivation restated), not with
    ``actorq.quantize.signing``, so a codec that signed the wrong bytes would be caught.
    """
    out = body + CRC.pack(zlib.crc32(body))
    if key is None:
        return out
    stream_key = hmac.new(key.secret, b"actorq weights stream\0" + stream.encode(), hashlib.sha256).digest()
    return out + hmac.new(stream_key, out, hashlib.sha256).digest()


def rebuild(
    header,
    payload: bytes,
    key: WeightsKey | None = TEST_KEY,
    *,
    stream: str = POLICY_STREAM,
    fver: int = 2,
    raw_header: bytes | None = None,
    auth: int | None = None,
    run_id: bytes | None = None,
) -> bytes:
    """Reassemble a (possibly crafted) message: valid crc, and a valid tag when ``key`` is given (by default
    the test key), so the decoder's deeper checks are reached. ``auth``/``run_id`` override the preamble."""
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    h += b" " * (-(PRE.size + len(h)) % 8)
    auth = (1 if key is not None else 0) if auth is None else auth
    run_id = (key.run_id if key is not None else bytes(8)) if run_id is None else run_id
    body = PRE.pack(b"AQWM", fver, auth, run_id, len(h), len(payload)) + h + payload
    return seal(body, key, stream)


def resign(msg, key: WeightsKey | None = TEST_KEY, **overrides) -> bytes:
    """``msg`` re-sealed (with ``key``, or unsigned) after its header or payload were edited."""
    header, payload = split(msg)
    return rebuild(header, payload, key, **overrides)


def patch_payload(msg, offset: int, data: bytes, key: WeightsKey | None = TEST_KEY) -> bytes:
    """``msg`` with ``data`` written at ``offset`` of its stored payload, re-sealed."""
    header, payload = split(msg)
    p = bytearray(payload)
    p[offset : offset + len(data)] = data
    return rebuild(header, bytes(p), key)
