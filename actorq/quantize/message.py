"""What a weight message decodes to, and the errors encoding or decoding one raises (the wire format and its
checks are in :mod:`actorq.quantize.codec`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from actorq.errors import ActorQError
from actorq.quantize.affine import QParams, dequantize


class WeightMessageError(ActorQError, ValueError):
    """Base class: a weight message can't be encoded or decoded."""


class TruncatedMessageError(WeightMessageError):
    """Fewer bytes than the preamble or its declared lengths require."""


class ChecksumMismatchError(WeightMessageError):
    """The crc32 trailer doesn't match the bytes: corrupted in transit or storage."""


class UnsupportedVersionError(WeightMessageError):
    """The message uses a format version this code can't read."""


class UnauthenticatedMessageError(WeightMessageError):
    """The message's signature is missing, wrong (forged, corrupted, or signed with another run's key), or it is a
    validly signed but stale message (a version at or below one already installed: a replay)."""


class LegacyUnsignedMessageError(UnauthenticatedMessageError, UnsupportedVersionError):
    """A format-1 message: written before messages were signed, so it can't be authenticated (nor read)."""


class MalformedMessageError(WeightMessageError):
    """Not an ActorQ message, or a header/payload that is internally inconsistent."""


class UnknownTensorError(WeightMessageError):
    """The message carries a tensor the receiving network doesn't have."""


class MissingTensorError(WeightMessageError):
    """The receiving network expects a tensor the message doesn't carry."""


class ShapeMismatchError(WeightMessageError):
    """A tensor's shape differs from what the receiving network expects."""


class NonFiniteWeightsError(WeightMessageError):
    """NaN or Inf in weights or scales."""


@dataclass(frozen=True)
class MessageHeader:
    """What :func:`read_header` returns: the message's metadata, without touching the payload."""

    format_version: int
    version: int
    learner_step: int
    precision: str
    comm_bits: int
    compressed: bool
    num_tensors: int
    nbytes: int
    signed: bool = False
    """True when the message carries an HMAC tag (verified only when the reader passed a key)."""
    run_id: str = ""
    """Hex run id (key fingerprint) the message names; empty for unsigned messages."""


@dataclass(frozen=True, eq=False)
class EncodedTensor:
    """One decoded tensor as it travelled: f32/f16 values, or int8 codes with their scales."""

    name: str
    shape: tuple[int, ...]
    encoding: str
    data: np.ndarray
    bits: int
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    axis: int | None = None

    def to_float32(self) -> np.ndarray:
        """float32 values: ``data`` for f32/f16, ``scale * codes`` for q."""
        if self.encoding != "q":
            return self.data.astype(np.float32, copy=False)
        assert self.scale is not None and self.zero_point is not None
        qp = QParams(self.scale, self.zero_point, self.bits, True, self.axis)
        return dequantize(self.data, qp)


@dataclass(frozen=True, eq=False)
class WeightMessage:
    """A decoded message: metadata plus tensors in the order the learner sent them."""

    version: int
    learner_step: int
    precision: str
    comm_bits: int
    tensors: dict[str, EncodedTensor]
    nbytes: int

    def float32_state(self) -> dict[str, np.ndarray]:
        """``{name: float32 array}`` ready to load into a network."""
        return {name: t.to_float32() for name, t in self.tensors.items()}
