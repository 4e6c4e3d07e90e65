"""Quantization schemes for torch layers and the numpy maths that applies them to one weight array.

The numbers always come from :mod:`actorq.quantize.affine` / :mod:`actorq.quantize.floats`, so a weight
quantized here is bit-for-bit the weight the rest of ActorQ would produce for the same scheme.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from actorq.quantize import affine, floats

QUANT_LAYER_TYPES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
FLOAT_PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class QuantScheme:
    """How weights are quantized.

    Attributes:
        precision: ``"fp32"`` (no-op), ``"fp16"``, ``"bf16"`` or ``"int"`` (uniform affine, ``bits`` wide).
        bits: Bit width for ``"int"`` (2..16); 32/16 for the float precisions.
        symmetric: Symmetric restricted range (weights are roughly zero-centred, so this is the default).
        per_channel_linear: One scale per output row of a Linear (else one per tensor).
        per_channel_conv: One scale per output channel of a convolution.
    """

    precision: str = "int"
    bits: int = 8
    symmetric: bool = True
    per_channel_linear: bool = False
    per_channel_conv: bool = True

    @classmethod
    def parse(cls, spec: str | int, **kwargs: bool) -> QuantScheme:
        """Build a scheme from ``"fp32"``, ``"fp16"``, ``"bf16"``, ``"8"`` or ``"int8"``."""
        s = str(spec).strip().lower()
        if s in FLOAT_PRECISIONS:
            return cls(precision=s, bits=32 if s == "fp32" else 16, **kwargs)
        s = s.removeprefix("int")
        if not s.isdigit():
            raise ValueError(f"unknown precision {spec!r}: use fp32, fp16, bf16 or an integer bit width")
        bits = int(s)
        if not affine.MIN_BITS <= bits <= affine.MAX_BITS:
            raise ValueError(f"bit width must be in [{affine.MIN_BITS}, {affine.MAX_BITS}], got {bits}")
        return cls(precision="int", bits=bits, **kwargs)

    @property
    def label(self) -> str:
        """Short name used in tables: ``fp32``, ``fp16``, ``bf16`` or ``int8`` etc."""
        return self.precision if self.precision != "int" else f"int{self.bits}"

    def axis_for(self, layer: nn.Module) -> int | None:
        """Per-channel axis for ``layer``'s weight (0 = output channels) or None for per tensor."""
        if isinstance(layer, nn.Linear):
            return 0 if self.per_channel_linear else None
        return 0 if self.per_channel_conv else None

    def describe(self, layer: nn.Module) -> str:
        """Human-readable scheme of one layer, e.g. ``int4 symmetric per-channel(axis 0)``."""
        if self.precision != "int":
            return self.precision
        axis = self.axis_for(layer)
        gran = "per-tensor" if axis is None else f"per-channel(axis {axis})"
        return f"{self.label} {'symmetric' if self.symmetric else 'asymmetric'} {gran}"


def quantize_array(w: np.ndarray, scheme: QuantScheme, axis: int | None = None) -> np.ndarray:
    """Weights after quantization and dequantization under ``scheme`` (float32, same shape).

    Per-channel quantization flattens every axis but ``axis`` first, so a conv kernel
    ``(out, in, kh, kw)`` gets exactly one scale per output channel.
    """
    w = np.asarray(w, np.float32)
    if scheme.precision == "fp32":
        return w.copy()
    if scheme.precision == "fp16":
        return floats.to_fp16(w).astype(np.float32)
    if scheme.precision == "bf16":
        return np.asarray(floats.round_bf16(w), np.float32)
    if axis is None:
        return affine.fake_quantize(w, scheme.bits, symmetric=scheme.symmetric, axis=None)
    moved = np.moveaxis(w, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    out = affine.fake_quantize(flat, scheme.bits, symmetric=scheme.symmetric, axis=0)
    return np.moveaxis(out.reshape(moved.shape), 0, axis)


def weight_qparams(w: np.ndarray, scheme: QuantScheme, axis: int | None) -> affine.QParams:
    """The affine parameters :func:`quantize_array` uses for ``w`` (``scheme`` must be ``int``)."""
    if scheme.precision != "int":
        raise ValueError("float precisions have no affine parameters")
    w = np.asarray(w, np.float32)
    if axis is None:
        return affine.compute_qparams(w, scheme.bits, symmetric=scheme.symmetric)
    flat = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    return affine.compute_qparams(flat, scheme.bits, symmetric=scheme.symmetric, axis=0)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A detached float32 numpy copy of ``t`` on the CPU (the form the numpy quantization maths takes)."""
    return t.detach().to("cpu", torch.float32).numpy()
