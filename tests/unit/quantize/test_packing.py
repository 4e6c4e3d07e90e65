"""Bit packing of 2..8-bit codes (actorq.quantize.packing)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorq.quantize.packing import pack_bits, packed_nbytes, unpack_bits


def _reference_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Independent oracle: the low ``bits`` bits of each code, MSB first, through np.packbits."""
    bitmat = np.unpackbits(codes.astype(np.uint8)[:, None], axis=1)[:, 8 - bits :]
    return np.packbits(bitmat.reshape(-1))


@st.composite
def codes_and_bits(draw):
    bits = draw(st.integers(2, 8))
    count = draw(st.integers(0, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    codes = np.random.default_rng(seed).integers(0, 1 << bits, count, dtype=np.uint8)
    return codes, bits


@settings(max_examples=200, deadline=None)
@given(cb=codes_and_bits())
def test_round_trip_and_layout(cb):
    codes, bits = cb
    packed = pack_bits(codes, bits)
    assert packed.dtype == np.uint8 and packed.size == packed_nbytes(codes.size, bits)
    assert packed.size == -(-codes.size * bits // 8)
    np.testing.assert_array_equal(packed, _reference_pack(codes, bits))
    out = unpack_bits(packed, bits, codes.size)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, codes)


@pytest.mark.parametrize("bits", range(2, 9))
@pytest.mark.parametrize("count", [1, 7, 8, 9, 1001])
def test_extreme_codes_and_odd_counts(bits, count):
    codes = np.full(count, (1 << bits) - 1, np.uint8)
    codes[::2] = 0
    np.testing.assert_array_equal(unpack_bits(pack_bits(codes, bits), bits, count), codes)


def test_four_bits_take_half_the_bytes_of_eight():
    for count in (2, 1000, 2048 * 2048):
        assert packed_nbytes(count, 4) * 2 == packed_nbytes(count, 8)
    codes = np.arange(16, dtype=np.uint8)
    assert pack_bits(codes, 4).size == pack_bits(codes, 8).size // 2
    np.testing.assert_array_equal(pack_bits(np.array([1, 2], np.uint8), 4), [0x12])


def test_large_round_trip_odd_width():
    codes = np.random.default_rng(0).integers(0, 32, 1_000_003, dtype=np.uint8)
    np.testing.assert_array_equal(unpack_bits(pack_bits(codes, 5), 5, codes.size), codes)


def test_accepts_wider_integer_dtypes_and_shapes():
    codes = np.arange(12, dtype=np.int32).reshape(3, 4) % 8
    np.testing.assert_array_equal(unpack_bits(pack_bits(codes, 3), 3, 12), codes.reshape(-1))


@pytest.mark.parametrize("bad", [[4], [-1]])
def test_out_of_range_codes_rejected(bad):
    with pytest.raises(ValueError):
        pack_bits(np.array(bad, np.int16), 2)


def test_wrong_lengths_and_bits_rejected():
    with pytest.raises(ValueError):
        unpack_bits(np.zeros(3, np.uint8), 4, 4)
    with pytest.raises(ValueError):
        pack_bits(np.zeros(3, np.uint8), 9)
    with pytest.raises(ValueError):
        packed_nbytes(-1, 4)
    with pytest.raises(TypeError):
        pack_bits(np.zeros(3, np.float32), 4)
