"""Pure-numpy quantization core of ActorQ.

* ``affine``: uniform affine quantization, 2..16 bits, symmetric (restricted range, int8 in [-127, 127]) or
  asymmetric, per-tensor or per-channel: ``q = clamp(rint(x / s) + z, qmin, qmax)``, ``x^ = s (q - z)``.
* ``floats``: fp16 and bfloat16 (as uint16 bit patterns, round to nearest even) casts.
* ``packing``: dense bit packing of 2..8-bit codes (``ceil(n * bits / 8)`` bytes).
* ``codec``: the versioned, checksummed, signed, pickle-free weight message the learner broadcasts to actors;
  ``message``: what it decodes to and the errors it raises; ``header``: its header checks;
  ``signing``: HMAC-SHA256 with a per-run key (run id, per-stream keys, constant-time verification).
"""

from __future__ import annotations

from actorq.quantize.affine import (
    QParams,
    compute_qparams,
    dequantize,
    fake_quantize,
    qrange,
    quantize,
    quantize_tensor,
)
from actorq.quantize.codec import (
    MESSAGE_VERSION,
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
    decode_message,
    encode_message,
    read_header,
)
from actorq.quantize.floats import bf16_bits, from_bf16_bits, round_bf16, to_fp16
from actorq.quantize.packing import pack_bits, packed_nbytes, unpack_bits
from actorq.quantize.signing import (
    LEARNER_STREAM,
    POLICY_STREAM,
    WeightsKey,
    generate_key,
    sign,
    verify,
)

__all__ = [
    "LEARNER_STREAM",
    "MESSAGE_VERSION",
    "POLICY_STREAM",
    "ChecksumMismatchError",
    "EncodedTensor",
    "LegacyUnsignedMessageError",
    "MalformedMessageError",
    "MessageHeader",
    "MissingTensorError",
    "NonFiniteWeightsError",
    "QParams",
    "ShapeMismatchError",
    "TruncatedMessageError",
    "UnauthenticatedMessageError",
    "UnknownTensorError",
    "UnsupportedVersionError",
    "WeightMessage",
    "WeightMessageError",
    "WeightsKey",
    "bf16_bits",
    "compute_qparams",
    "decode_message",
    "dequantize",
    "encode_message",
    "fake_quantize",
    "from_bf16_bits",
    "generate_key",
    "pack_bits",
    "packed_nbytes",
    "qrange",
    "quantize",
    "quantize_tensor",
    "read_header",
    "round_bf16",
    "sign",
    "to_fp16",
    "unpack_bits",
    "verify",
]
