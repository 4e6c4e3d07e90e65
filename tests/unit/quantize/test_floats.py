"""fp16 / bf16 casts (actorq.quantize.floats)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from actorq.quantize.floats import bf16_bits, from_bf16_bits, round_bf16, to_fp16

F32 = hnp.arrays(np.float32, st.integers(0, 64), elements=st.floats(width=32))


def _reference_bf16(v: float) -> float:
    """Nearest bf16 to v, ties to even, by comparing its two neighbours in float64 (independent oracle)."""
    u = int(np.array([v], np.float32).view(np.uint32)[0])
    down, up = u & 0xFFFF0000, (u & 0xFFFF0000) + 0x10000
    lo = float(np.array([down], np.uint32).view(np.float32)[0])
    hi = float(np.array([up], np.uint32).view(np.float32)[0])
    if np.isinf(hi):
        hi = float(np.copysign(2.0**128, v))  # the value one bf16 step past max; rounds to inf
    d_lo, d_hi = abs(v - lo), abs(hi - v)  # exact in float64
    pick_hi = d_hi < d_lo or (d_hi == d_lo and (down >> 16) & 1 == 1)
    return (float(np.copysign(np.inf, v)) if abs(hi) == 2.0**128 else hi) if pick_hi else lo


@settings(max_examples=150, deadline=None)
@given(x=F32)
def test_bf16_matches_reference_and_is_representable(x):
    b = bf16_bits(x)
    assert b.dtype == np.uint16 and b.shape == x.shape
    y = round_bf16(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(y), np.isnan(x))
    assert np.all(y.view(np.uint32) & 0xFFFF == 0)
    np.testing.assert_array_equal(round_bf16(y), y)  # idempotent
    for v, r in zip(x.tolist(), y.tolist(), strict=True):
        if not np.isnan(v):
            assert r == _reference_bf16(v), (v, r)


def test_bf16_special_values():
    nan_low_payload = np.array([0x7F800001, 0xFF800001, 0x7FC00000], np.uint32).view(np.float32)
    out = bf16_bits(nan_low_payload)
    assert np.all(np.isnan(from_bf16_bits(out)))  # payload only in the dropped bits must not become inf
    np.testing.assert_array_equal(out >> 15, [0, 1, 0])  # sign kept
    big = np.array(
        [np.finfo(np.float32).max, -np.finfo(np.float32).max, np.inf, -np.inf, 0.0, -0.0], np.float32
    )
    np.testing.assert_array_equal(round_bf16(big), [np.inf, -np.inf, np.inf, -np.inf, 0.0, -0.0])
    assert np.signbit(round_bf16(np.array([-0.0], np.float32)))[0]
    # 1 + 2^-8 is exactly halfway between bf16 1.0 and 1 + 2^-7: ties to even -> 1.0.
    halfway = np.array([1 + 2**-8, 1 + 3 * 2**-8], np.float32)
    np.testing.assert_array_equal(round_bf16(halfway), [1.0, 1 + 2**-6])


def test_from_bf16_bits_rejects_other_dtypes():
    with pytest.raises(TypeError):
        from_bf16_bits(np.zeros(3, np.int32))


@settings(max_examples=60, deadline=None)
@given(x=F32)
def test_fp16_is_ieee_half(x):
    h = to_fp16(x)
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h, x.astype(np.float16))


def test_fp16_overflow_is_inf():
    h = to_fp16(np.array([65504.0, 65520.0, 1e6, -1e6], np.float32))
    np.testing.assert_array_equal(h, np.array([65504.0, np.inf, np.inf, -np.inf], np.float16))
