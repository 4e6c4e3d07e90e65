"""Bit packing of unsigned 2..8-bit codes into a dense byte stream.

Layout: a continuous big-endian bitstream. Code ``i`` occupies bits ``[i*b, (i+1)*b)`` counted from the
most significant bit of byte 0, so for 4 bits byte 0 holds ``(c0 << 4) | c1`` and for 2 bits
``(c0 << 6) | (c1 << 4) | (c2 << 2) | c3``. The last byte is zero-padded. Packed size is
``ceil(count * bits / 8)``: 4-bit codes take half the bytes of 8-bit ones.

Every width uses whole-array numpy operations: 8 bits is a copy, 2 and 4 bits shift-and-or a
``(n, 8 // b)`` reshape, and 3/5/6/7 bits gather 8 codes (``8 * b`` bits, at most 56) into one big-endian
uint64 and keep its low ``b`` bytes.
"""

from __future__ import annotations

import numpy as np

MIN_PACK_BITS = 2
MAX_PACK_BITS = 8


def _check_bits(bits: int) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"bits must be an int, got {type(bits).__name__}")
    if not MIN_PACK_BITS <= bits <= MAX_PACK_BITS:
        raise ValueError(f"packing supports {MIN_PACK_BITS}..{MAX_PACK_BITS} bits, got {bits}")
    return int(bits)


def packed_nbytes(count: int, bits: int) -> int:
    """Bytes needed for ``count`` codes of ``bits`` bits: ``ceil(count * bits / 8)``."""
    bits = _check_bits(bits)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return (int(count) * bits + 7) // 8


def _padded(a: np.ndarray, multiple: int) -> np.ndarray:
    pad = -a.size % multiple
    if pad:
        a = np.concatenate([a, np.zeros(pad, a.dtype)])
    return a


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned codes into a bitstream.

    Args:
        codes: Integer array (any shape, flattened in C order) with values in ``[0, 2^bits - 1]``.
        bits: Code width, 2..8.

    Returns:
        1-D uint8 array of ``packed_nbytes(codes.size, bits)`` bytes.

    Raises:
        ValueError: A code is negative or needs more than ``bits`` bits.
    """
    bits = _check_bits(bits)
    codes = np.asarray(codes)
    if not np.issubdtype(codes.dtype, np.integer):
        raise TypeError(f"codes must be integers, got dtype {codes.dtype}")
    flat = codes.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() > (1 << bits) - 1):
        raise ValueError(f"codes must be in [0, {(1 << bits) - 1}] for {bits}-bit packing")
    flat = flat.astype(np.uint8, copy=bits == 8)
    count = flat.size
    if bits == 8:
        return flat
    if bits in (2, 4):
        per = 8 // bits
        groups = _padded(flat, per).reshape(-1, per)
        out = groups[:, 0] << np.uint8(8 - bits)
        for j in range(1, per):
            out |= groups[:, j] << np.uint8(8 - bits * (j + 1))
        return out
    groups = _padded(flat, 8).reshape(-1, 8).astype(np.uint64)
    acc = groups[:, 0] << np.uint64(7 * bits)
    for j in range(1, 8):
        acc |= groups[:, j] << np.uint64((7 - j) * bits)
    raw = acc.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - bits :]
    return np.ascontiguousarray(raw).reshape(-1)[: packed_nbytes(count, bits)]


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`.

    Args:
        packed: 1-D uint8 array (or bytes-like) of exactly ``packed_nbytes(count, bits)`` bytes.
        bits: Code width, 2..8.
        count: Number of codes to recover.

    Returns:
        1-D uint8 array of ``count`` codes.

    Raises:
        ValueError: ``packed`` has the wrong length.
    """
    bits = _check_bits(bits)
    if not isinstance(packed, np.ndarray):
        packed = np.frombuffer(packed, dtype=np.uint8)
    packed = packed.reshape(-1)
    if packed.dtype != np.uint8:
        raise TypeError(f"packed must be uint8, got dtype {packed.dtype}")
    need = packed_nbytes(count, bits)
    if packed.size != need:
        raise ValueError(f"{count} codes of {bits} bits need {need} bytes, got {packed.size}")
    if bits == 8:
        return packed.copy()
    mask_b = (1 << bits) - 1
    if bits in (2, 4):
        per = 8 // bits
        out = np.empty((packed.size, per), np.uint8)
        for j in range(per):
            np.bitwise_and(packed >> np.uint8(8 - bits * (j + 1)), np.uint8(mask_b), out=out[:, j])
        return out.reshape(-1)[:count]
    ngroups = (count + 7) // 8
    buf = np.zeros((ngroups, 8), np.uint8)
    body = np.zeros(ngroups * bits, np.uint8)
    body[:need] = packed
    buf[:, 8 - bits :] = body.reshape(ngroups, bits)
    acc = buf.view(">u8").reshape(-1).astype(np.uint64)
    out = np.empty((ngroups, 8), np.uint8)
    mask = np.uint64(mask_b)
    for j in range(8):
        out[:, j] = (acc >> np.uint64((7 - j) * bits)) & mask
    return out.reshape(-1)[:count]
