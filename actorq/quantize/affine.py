"""Uniform affine quantization (2..16 bits), symmetric or asymmetric, per-tensor or per-channel.

Notation used throughout (s = scale, z = zero point, all ops elementwise, broadcast per channel):

    q  = clamp(rint(x / s) + z, qmin, qmax)        # quantize
    x^ = s * (q - z)                               # dequantize

``rint`` rounds half to even (``np.rint``), so ties such as 0.5 go to 0 and 1.5 to 2; the error bound
``|x - x^| <= s / 2`` holds for every x inside the clipping range ``[s (qmin - z), s (qmax - z)]``
whichever way a tie goes.

Symmetric quantization uses the restricted range ``[-(2^(b-1) - 1), 2^(b-1) - 1]`` (int8 is [-127, 127]):
the code -128 is never produced, so negating a code can't overflow and +/- amax are equally precise.
Asymmetric quantization uses ``[0, 2^b - 1]`` and always includes 0.0 in the range so that zero is exactly
representable (padding, ReLU outputs, pruned weights).

Zero-range guard: an all-zero channel gets s = 1, z = 0; a constant channel c != 0 gets s = |c| with z
chosen so that c maps to a code that dequantizes to exactly c; a channel whose range underflows gets the
smallest normal float32 as scale. Every scale is therefore finite and strictly positive.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

MIN_BITS = 2
MAX_BITS = 16
_F32_TINY = np.float32(np.finfo(np.float32).tiny)
_F32_MAX = float(np.finfo(np.float32).max)


def _check_bits(bits: int) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"bits must be an int, got {type(bits).__name__}")
    if not MIN_BITS <= bits <= MAX_BITS:
        raise ValueError(f"bits must be in [{MIN_BITS}, {MAX_BITS}], got {bits}")
    return int(bits)


def qrange(bits: int, symmetric: bool) -> tuple[int, int]:
    """Integer code range for a bit width.

    Args:
        bits: Bit width, 2..16.
        symmetric: Restricted signed range ``(-(2^(b-1) - 1), 2^(b-1) - 1)`` if True, else the unsigned
            range ``(0, 2^b - 1)``.

    Returns:
        ``(qmin, qmax)``, both inclusive.
    """
    bits = _check_bits(bits)
    if symmetric:
        half = (1 << (bits - 1)) - 1
        return -half, half
    return 0, (1 << bits) - 1


def code_dtype(bits: int, symmetric: bool) -> np.dtype:
    """Smallest numpy integer dtype holding every code of ``qrange(bits, symmetric)``.

    int8 (symmetric, <= 8 bits), uint8 (asymmetric, <= 8 bits), int16 when the range fits, else int32.
    """
    qmin, qmax = qrange(bits, symmetric)
    if bits <= 8:
        return np.dtype(np.int8 if symmetric else np.uint8)
    if np.iinfo(np.int16).min <= qmin and qmax <= np.iinfo(np.int16).max:
        return np.dtype(np.int16)
    return np.dtype(np.int32)


@dataclass(frozen=True, eq=False)
class QParams:
    """Quantization parameters: ``q = clamp(rint(x / scale) + zero_point, qmin, qmax)``.

    Attributes:
        scale: float32, shape ``()`` (per-tensor) or ``(C,)`` (per-channel along ``axis``); all > 0.
        zero_point: int32, same shape as ``scale``; always 0 when ``symmetric``.
        bits: Bit width, 2..16.
        symmetric: Whether the restricted signed range is used.
        axis: Channel axis (non-negative) or None for per-tensor.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    bits: int
    symmetric: bool
    axis: int | None

    @property
    def qmin(self) -> int:
        return qrange(self.bits, self.symmetric)[0]

    @property
    def qmax(self) -> int:
        return qrange(self.bits, self.symmetric)[1]

    def broadcast(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point reshaped to broadcast against an ``ndim``-dimensional tensor."""
        if self.axis is None:
            return self.scale, self.zero_point
        if not 0 <= self.axis < ndim:
            raise ValueError(f"per-channel axis {self.axis} is out of range for a {ndim}-d tensor")
        shape = [1] * ndim
        shape[self.axis] = -1
        return self.scale.reshape(shape), self.zero_point.reshape(shape)


def _normalize_axis(axis: int | None, ndim: int) -> int | None:
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an int or None, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for a {ndim}-d tensor")
    return int(axis) % ndim


def _reduce(x: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (or whole-tensor) min and max as float64; an empty tensor gives zeros."""
    nchan = () if axis is None else (x.shape[axis],)
    if x.size == 0:
        # Either every channel is empty or none is, so this is the only empty case.
        return np.zeros(nchan), np.zeros(nchan)
    red = None if axis is None else tuple(i for i in range(x.ndim) if i != axis)
    return np.asarray(np.min(x, axis=red), np.float64), np.asarray(np.max(x, axis=red), np.float64)


def compute_qparams(x: np.ndarray, bits: int, symmetric: bool = True, axis: int | None = None) -> QParams:
    """Scale and zero point covering the range of ``x``.

    Symmetric: ``s = max|x| / qmax``, ``z = 0``. Asymmetric: with ``lo = min(x, 0)``, ``hi = max(x, 0)``,
    ``s = (hi - lo) / (qmax - qmin)``, ``z = clamp(qmin - rint(lo / s), qmin, qmax)``. The scale is
    nudged down by one ulp when needed so that ``s * qmax`` never exceeds the data range (no overflow
    on dequantize). See the module docstring for the zero-range guard.

    Args:
        x: Real-valued array; must be finite.
        bits: Bit width, 2..16.
        symmetric: Restricted signed range with z = 0 (True) or unsigned range with a zero point.
        axis: Per-channel axis (negative counts from the end) or None for one scale for the tensor.

    Returns:
        The QParams (axis normalised to be non-negative).

    Raises:
        ValueError: Bad bits/axis, non-finite values, or (asymmetric) a range wider than float32 max.
    """
    bits = _check_bits(bits)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"expected a real numeric array, got dtype {x.dtype}")
    axis = _normalize_axis(axis, x.ndim)
    qmin, qmax = qrange(bits, symmetric)
    xmin, xmax = _reduce(x, axis)
    if not (np.isfinite(xmin).all() and np.isfinite(xmax).all()):
        raise ValueError("cannot quantize a tensor containing NaN or Inf")
    const = xmin == xmax
    if symmetric:
        span = np.maximum(np.abs(xmin), np.abs(xmax))
        levels = qmax
    else:
        lo, hi = np.minimum(xmin, 0.0), np.maximum(xmax, 0.0)
        span = hi - lo
        levels = qmax - qmin
        if np.any(span > _F32_MAX):
            raise ValueError("asymmetric range wider than float32 max; use symmetric quantization")
    scale = (span / levels).astype(np.float32)
    # One ulp down where float32 rounding made s * levels exceed the range: keeps s * (q - z) finite.
    over = scale.astype(np.float64) * levels > span
    scale = np.where(over, np.nextafter(scale, np.float32(0)), scale)
    scale = np.maximum(scale, _F32_TINY)
    if symmetric:
        zero = np.zeros(scale.shape, np.int32)
    else:
        zero = np.clip(qmin - np.rint(lo / scale.astype(np.float64)), qmin, qmax).astype(np.int32)
    # Constant channels: s = |c| represents c exactly (code +/-1 around z); all-zero channels: s = 1.
    cval = xmin
    scale = np.where(const, np.where(cval == 0, np.float32(1), np.abs(cval).astype(np.float32)), scale)
    if not symmetric:
        zero = np.where(const & (cval < 0), np.int32(qmin + 1), np.where(const, np.int32(qmin), zero))
    return QParams(
        scale=np.asarray(scale, np.float32),
        zero_point=np.asarray(zero, np.int32),
        bits=bits,
        symmetric=bool(symmetric),
        axis=axis,
    )


def _quantize_unchecked(x: np.ndarray, qp: QParams) -> np.ndarray:
    scale, zero = qp.broadcast(x.ndim)
    # float32 division is exact enough up to 8 bits; wider codes use float64 so the s/2 bound stays tight.
    work = np.float32 if qp.bits <= 8 else np.float64
    y = np.divide(np.asarray(x, work), scale.astype(work))
    np.rint(y, out=y)
    if qp.symmetric:
        np.clip(y, qp.qmin, qp.qmax, out=y)
    else:
        y += zero
        np.clip(y, qp.qmin, qp.qmax, out=y)
    return y.astype(code_dtype(qp.bits, qp.symmetric))


def quantize(x: np.ndarray, qp: QParams) -> np.ndarray:
    """Integer codes ``q = clamp(rint(x / s) + z, qmin, qmax)`` (round half to even).

    Values outside the clipping range saturate to qmin/qmax, so codes are always in range.

    Args:
        x: Real-valued array; NaN is rejected (+/-Inf saturate).
        qp: Parameters from :func:`compute_qparams`.

    Returns:
        Codes of dtype :func:`code_dtype` (int8/uint8 up to 8 bits), same shape as ``x``.
    """
    x = np.asarray(x)
    if np.isnan(x).any():
        raise ValueError("cannot quantize NaN")
    with np.errstate(over="ignore", invalid="ignore"):
        return _quantize_unchecked(x, qp)


def dequantize(codes: np.ndarray, qp: QParams) -> np.ndarray:
    """Real values ``x^ = s * (q - z)`` as float32."""
    codes = np.asarray(codes)
    scale, zero = qp.broadcast(codes.ndim)
    if qp.symmetric:
        return np.multiply(codes, scale, dtype=np.float32)
    return np.multiply(codes.astype(np.float32) - zero.astype(np.float32), scale, dtype=np.float32)


def quantize_tensor(
    x: np.ndarray, bits: int, symmetric: bool = True, axis: int | None = None
) -> tuple[np.ndarray, QParams]:
    """Compute parameters for ``x`` and quantize it: ``(quantize(x, qp), qp)``."""
    qp = compute_qparams(x, bits, symmetric=symmetric, axis=axis)
    return _quantize_unchecked(np.asarray(x), qp), qp


def fake_quantize(x: np.ndarray, bits: int, symmetric: bool = True, axis: int | None = None) -> np.ndarray:
    """Quantize then dequantize: ``s * (clamp(rint(x / s) + z, qmin, qmax) - z)`` as float32."""
    codes, qp = quantize_tensor(x, bits, symmetric=symmetric, axis=axis)
    return dequantize(codes, qp)
