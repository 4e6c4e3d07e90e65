"""Reduced-precision float casts: IEEE fp16 and bfloat16 (carried as its uint16 bit pattern).

numpy has no bfloat16 dtype, so bf16 values travel as the top 16 bits of the float32 pattern. The cast
rounds to nearest, ties to even, in integer arithmetic:

    u = bits(x); bf16 = (u + 0x7FFF + ((u >> 16) & 1)) >> 16

NaN is handled separately (the addition could carry a NaN's payload into the exponent and turn it into
Inf): it keeps its sign and becomes a quiet NaN. Finite values too large for bf16 round to +/-Inf exactly
as IEEE rounding would.
"""

from __future__ import annotations

import numpy as np

_QUIET_BIT = np.uint16(0x0040)


def to_fp16(x: np.ndarray) -> np.ndarray:
    """IEEE half precision (round to nearest even); |x| > 65504 becomes +/-Inf, NaN stays NaN."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of ``x`` (rounded to nearest even) as uint16, same shape as ``x``."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = np.isnan(u.view(np.float32))
    # Values with NaN are masked out below; adding 0x7FFF to them could wrap uint32 (harmless, discarded).
    rounded = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    if nan.any():
        out[nan] = (u[nan] >> np.uint32(16)).astype(np.uint16) | _QUIET_BIT
    return out


def from_bf16_bits(u16: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact: every bf16 is a float32)."""
    u16 = np.asarray(u16)
    if u16.dtype != np.uint16:
        raise TypeError(f"expected uint16 bf16 bit patterns, got dtype {u16.dtype}")
    return (u16.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the nearest bfloat16 value, returned as float32."""
    return from_bf16_bits(bf16_bits(x))
