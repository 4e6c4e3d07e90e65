"""Pure-numpy quantization core of ActorQ.

* ``affine``: uniform affine quantization, 2..16 bits, symmetric (restricted range, int8 in [-127, 127]) or
  asymmetric, per-tensor or per-channel: ``q = clamp(rint(x / s) + z, qmin, qmax)``, ``x^ = s (q - z)``.
* ``floats``: fp16 and bfloat16 (as uint16 bit patterns, round to nearest even) casts.
* ``packing``: dense bit packing of 2..8-bit codes (``ceil(n * bits / 8)`` bytes).
* ``codec``: the versioned, checksummed, pickle-free weight message the learner broadcasts to actors;
  ``message``: what it decodes to and the errors it raises.
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
    decode_message,
    encode_message,
    read_header,
)
from actorq.quantize.floats import bf16_bits, from_bf16_bits, round_bf16, to_fp16
from actorq.quantize.packing import pack_bits, packed_nbytes, unpack_bits

__all__ = [
    "MESSAGE_VERSION",
    "ChecksumMismatchError",
    "EncodedTensor",
    "MalformedMessageError",
    "MessageHeader",
    "MissingTensorError",
    "NonFiniteWeightsError",
    "QParams",
    "ShapeMismatchError",
    "TruncatedMessageError",
    "UnknownTensorError",
    "UnsupportedVersionError",
    "WeightMessage",
    "WeightMessageError",
    "bf16_bits",
    "compute_qparams",
    "decode_message",
    "dequantize",
    "encode_message",
    "fake_quantize",
    "from_bf16_bits",
    "pack_bits",
    "packed_nbytes",
    "qrange",
    "quantize",
    "quantize_tensor",
    "read_header",
    "round_bf16",
    "to_fp16",
    "unpack_bits",
]
