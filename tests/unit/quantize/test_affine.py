"""Properties of uniform affine quantization (actorq.quantize.affine)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from actorq.quantize.affine import (
    code_dtype,
    compute_qparams,
    dequantize,
    fake_quantize,
    qrange,
    quantize,
    quantize_tensor,
)

F32_MAX = float(np.finfo(np.float32).max)
BITS = st.integers(2, 16)
SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6)


def arrays(bound: float = 2.0**100) -> st.SearchStrategy[np.ndarray]:
    elems = st.floats(-bound, bound, width=32, allow_nan=False, allow_infinity=False)
    return hnp.arrays(np.float32, SHAPES, elements=elems)


def _tolerance(x: np.ndarray, qp) -> np.ndarray:
    scale, _ = qp.broadcast(x.ndim)
    # s/2 from rounding, plus float32 rounding in x / s (relative 2^-24 of a code <= 2^15) and in s * q.
    return scale.astype(np.float64) * (0.5 + 2.0**-8) + np.abs(x.astype(np.float64)) * 2.0**-22


@pytest.mark.parametrize(
    ("bits", "symmetric", "expected"),
    [
        (8, True, (-127, 127)),
        (8, False, (0, 255)),
        (2, True, (-1, 1)),
        (4, True, (-7, 7)),
        (16, True, (-32767, 32767)),
        (16, False, (0, 65535)),
    ],
)
def test_qrange(bits, symmetric, expected):
    assert qrange(bits, symmetric) == expected


@pytest.mark.parametrize("bits", [0, 1, 17, 32])
def test_bits_out_of_range_rejected(bits):
    with pytest.raises(ValueError):
        qrange(bits, True)
    with pytest.raises(ValueError):
        compute_qparams(np.ones(3, np.float32), bits)


def test_code_dtypes():
    assert code_dtype(8, True) == np.int8 and code_dtype(8, False) == np.uint8
    assert code_dtype(12, True) == np.int16 and code_dtype(12, False) == np.int16
    assert code_dtype(16, True) == np.int16 and code_dtype(16, False) == np.int32


@settings(max_examples=150, deadline=None)
@given(x=arrays(), bits=BITS, symmetric=st.booleans(), per_channel=st.booleans())
def test_codes_in_range_and_error_within_half_step(x, bits, symmetric, per_channel):
    codes, qp = quantize_tensor(x, bits, symmetric=symmetric, axis=0 if per_channel else None)
    qmin, qmax = qrange(bits, symmetric)
    assert codes.dtype == code_dtype(bits, symmetric) and codes.shape == x.shape
    assert codes.min() >= qmin and codes.max() <= qmax
    assert np.all(np.isfinite(qp.scale)) and np.all(qp.scale > 0)
    assert np.all((qp.zero_point >= qmin) & (qp.zero_point <= qmax))
    if symmetric:
        assert np.all(qp.zero_point == 0)
    xhat = dequantize(codes, qp)
    assert xhat.dtype == np.float32 and np.all(np.isfinite(xhat))
    err = np.abs(x.astype(np.float64) - xhat.astype(np.float64))
    assert np.all(err <= _tolerance(x, qp))
    np.testing.assert_array_equal(fake_quantize(x, bits, symmetric, 0 if per_channel else None), xhat)


@settings(max_examples=60, deadline=None)
@given(
    c=st.floats(-(2.0**100), 2.0**100, width=32),
    shape=SHAPES,
    bits=BITS,
    symmetric=st.booleans(),
    per_channel=st.booleans(),
)
def test_constant_tensors_round_trip_exactly(c, shape, bits, symmetric, per_channel):
    x = np.full(shape, c, np.float32)
    codes, qp = quantize_tensor(x, bits, symmetric=symmetric, axis=-1 if per_channel else None)
    assert np.all(qp.scale > 0)
    np.testing.assert_array_equal(dequantize(codes, qp), x)


@pytest.mark.parametrize("symmetric", [True, False])
def test_all_zero_tensor_gets_unit_scale(symmetric):
    x = np.zeros((4, 3), np.float32)
    codes, qp = quantize_tensor(x, 8, symmetric=symmetric, axis=0)
    np.testing.assert_array_equal(qp.scale, np.ones(4, np.float32))
    np.testing.assert_array_equal(dequantize(codes, qp), x)


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_extreme_values_never_overflow(bits):
    tiny = np.finfo(np.float32).tiny
    x = np.array([F32_MAX, -F32_MAX, tiny, -tiny, 1e-45, 0.0, 1.0], np.float32)
    codes, qp = quantize_tensor(x, bits)
    _, qmax = qrange(bits, True)
    assert codes.max() == qmax and codes.min() == -qmax  # int8: -127, never -128/+128
    xhat = dequantize(codes, qp)
    assert np.all(np.isfinite(xhat))
    assert np.all(np.abs(x.astype(np.float64) - xhat) <= _tolerance(x, qp))
    # Subnormal-only data still gets a positive normal scale.
    _, qp_small = quantize_tensor(np.array([1e-45, -1e-44], np.float32), bits)
    assert qp_small.scale > 0


def test_asymmetric_extreme_but_representable_range():
    x = np.array([-1e38, 1e38, 0.0], np.float32)
    codes, qp = quantize_tensor(x, 2, symmetric=False)
    assert np.all(np.isfinite(dequantize(codes, qp)))
    with pytest.raises(ValueError, match="asymmetric"):
        compute_qparams(np.array([-F32_MAX, F32_MAX], np.float32), 8, symmetric=False)


def test_saturates_outside_clipping_range():
    qp = compute_qparams(np.array([-1.0, 1.0], np.float32), 8)
    codes = quantize(np.array([-1e30, -2.0, 2.0, 1e30, np.inf, -np.inf], np.float32), qp)
    np.testing.assert_array_equal(codes, [-127, -127, 127, 127, 127, -127])


def test_round_half_to_even():
    qp = compute_qparams(np.array([-127.0, 127.0], np.float32), 8)  # scale exactly 1
    assert float(qp.scale) == 1.0
    np.testing.assert_array_equal(
        quantize(np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32), qp), [0, 2, 2, 0, -2]
    )


def test_per_channel_scales_follow_axis():
    x = np.array([[1.0, -2.0], [0.5, 0.25], [0.0, 0.0]], np.float32)
    qp = compute_qparams(x, 8, axis=0)
    assert qp.axis == 0 and qp.scale.shape == (3,)
    np.testing.assert_allclose(qp.scale, [2.0 / 127, 0.5 / 127, 1.0], rtol=1e-6)
    qp_last = compute_qparams(x, 8, axis=-1)
    assert qp_last.axis == 1 and qp_last.scale.shape == (2,)
    with pytest.raises(ValueError):
        compute_qparams(x, 8, axis=2)


def test_empty_tensors():
    for shape, axis in [((0, 4), 0), ((3, 0), 0), ((0,), None)]:
        x = np.zeros(shape, np.float32)
        codes, qp = quantize_tensor(x, 4, axis=axis)
        assert codes.shape == shape and np.all(qp.scale == 1)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError):
        compute_qparams(np.array([1.0, bad], np.float32), 8)
    qp = compute_qparams(np.array([1.0], np.float32), 8)
    if np.isnan(bad):
        with pytest.raises(ValueError):
            quantize(np.array([bad], np.float32), qp)
