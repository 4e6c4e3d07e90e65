"""Authenticating weight messages: HMAC-SHA256 with a per-run key (pure functions, no file or network I/O).

A run has one secret key (32 random bytes). From it derive, one way:

* the **run id**: 8 bytes of ``SHA-256("actorq run id" || key)``, written in clear into every signed message's
  preamble, so a message from another run (another key) is named as such before its tag is even checked, and the
  key's fingerprint can be shown in logs and summaries without revealing the key;
* one **stream key** per message stream (``policy``: quantizer -> actors and evaluator; ``learner``: learner ->
  quantizer and evaluator): ``HMAC-SHA256(key, "actorq weights stream " || stream)``. A message signed for one
  stream does not verify on the other, so a learner message copied into the policy table is rejected;
* the **run-state key** (:data:`RUN_STATE_STREAM`): ``HMAC-SHA256(key, "actorq run state")``, which signs the roles'
  resume records on the replay server (:mod:`actorq.replay.run_state_record`), so a record is never mistaken for a
  message or the other way round.

A message's tag is ``HMAC-SHA256(stream key, every byte of the message before the tag)``: preamble (format version,
signature scheme, run id, lengths), header (weight version, learner step, tensors) and payload. Tags are compared
with :func:`hmac.compare_digest` (constant time). Where the tag sits and what it covers is the codec's business
(:mod:`actorq.quantize.codec`); this module only does the maths.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

KEY_BYTES = 32
"""Length of a run's secret key (256 bits, HMAC-SHA256's block-size-friendly native strength)."""
TAG_BYTES = 32
"""Length of an HMAC-SHA256 tag."""
RUN_ID_BYTES = 8
"""Length of the run id (key fingerprint) carried in a signed message's preamble."""

POLICY_STREAM = "policy"
"""Quantized weights from the quantizer to actors (and the evaluator's quantized policy)."""
LEARNER_STREAM = "learner"
"""fp32 weights from the learner to the quantizer and the evaluator."""
STREAMS = (POLICY_STREAM, LEARNER_STREAM)
"""The weight-message streams."""
RUN_STATE_STREAM = "run_state"
"""The roles' resume records on the replay server (not a weight-message stream: its key has its own domain)."""

_RUN_ID_DOMAIN = b"actorq run id\0"
_STREAM_DOMAIN = b"actorq weights stream\0"
_RUN_STATE_DOMAIN = b"actorq run state\0"


@dataclass(frozen=True)
class WeightsKey:
    """A run's secret weights key and what derives from it. ``repr`` never shows the secret."""

    secret: bytes = field(repr=False)
    """The 32 secret bytes."""
    run_id: bytes = field(init=False)
    """8-byte fingerprint of ``secret``: names the run in messages, logs and summaries."""
    _stream_keys: dict[str, bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != KEY_BYTES:
            raise ValueError(f"a weights key is {KEY_BYTES} bytes")
        object.__setattr__(self, "run_id", run_id_of(self.secret))
        derived = {
            s: hmac.new(self.secret, _STREAM_DOMAIN + s.encode(), hashlib.sha256).digest() for s in STREAMS
        }
        derived[RUN_STATE_STREAM] = hmac.new(self.secret, _RUN_STATE_DOMAIN, hashlib.sha256).digest()
        object.__setattr__(self, "_stream_keys", derived)

    @property
    def run_id_hex(self) -> str:
        """The run id as 16 hex digits (safe to log: a one-way fingerprint of the key)."""
        return self.run_id.hex()

    def stream_key(self, stream: str) -> bytes:
        """The HMAC key of ``stream`` (one of :data:`STREAMS`, or :data:`RUN_STATE_STREAM`)."""
        try:
            return self._stream_keys[stream]
        except KeyError:
            raise ValueError(f"unknown stream {stream!r}; one of {(*STREAMS, RUN_STATE_STREAM)}") from None


def generate_key() -> WeightsKey:
    """A fresh random key from the OS's CSPRNG."""
    return WeightsKey(secrets.token_bytes(KEY_BYTES))


def run_id_of(secret: bytes) -> bytes:
    """The run id (key fingerprint) of ``secret``: first :data:`RUN_ID_BYTES` of SHA-256 over a domain and it."""
    return hashlib.sha256(_RUN_ID_DOMAIN + secret).digest()[:RUN_ID_BYTES]


def sign(key: WeightsKey, stream: str, data: Any) -> bytes:
    """HMAC-SHA256 tag of ``data`` (any bytes-like object, read without copying) under ``stream``'s key."""
    return hmac.new(key.stream_key(stream), data, hashlib.sha256).digest()


def verify(key: WeightsKey, stream: str, data: Any, tag: Any) -> bool:
    """True when ``tag`` is ``data``'s tag under ``stream``'s key; compared in constant time."""
    return hmac.compare_digest(sign(key, stream, data), bytes(tag))


def key_to_text(key: WeightsKey) -> str:
    """The key file's content: the secret as 64 hex digits and a newline."""
    return key.secret.hex() + "\n"


def key_from_text(text: str) -> WeightsKey:
    """Parse a key file's content (64 hex digits, surrounding whitespace ignored).

    Raises:
        ValueError: Not exactly 64 hex digits. The message never quotes the content.
    """
    stripped = text.strip()
    if len(stripped) != 2 * KEY_BYTES:
        raise ValueError(
            f"a weights key file holds {2 * KEY_BYTES} hex digits; this one has {len(stripped)} characters"
        )
    try:
        secret = bytes.fromhex(stripped)
    except ValueError:
        raise ValueError(
            f"a weights key file holds {2 * KEY_BYTES} hex digits; this one has other characters"
        ) from None
    return WeightsKey(secret)
