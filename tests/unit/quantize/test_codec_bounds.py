"""Bounds a signed message must keep even with a valid tag (what a buggy but authentic sender, or the holder of a
leaked key, could write): per-dimension sizes, contiguous payload segments, and a size cap checked before the HMAC
runs over a buffer of any length."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.quantize import MalformedMessageError, decode_message, encode_message, read_header, signing
from tests.messages import TEST_KEY, rebuild


def _f32(name: str, shape: list[int], data: list[int]) -> dict:
    return {
        "name": name,
        "shape": shape,
        "encoding": "f32",
        "bits": 32,
        "axis": None,
        "scale": None,
        "data": data,
    }


def _message(tensors: list[dict], payload: bytes) -> bytes:
    header = {
        "learner_step": 1,
        "version": 1,
        "precision": "fp32",
        "comm_bits": 32,
        "compressed": False,
        "payload_nbytes": len(payload),
        "tensors": tensors,
    }
    return rebuild(header, payload, TEST_KEY)


@pytest.mark.parametrize("shape", [[0, 10**30], [2**31, 0], [0, 2**31], [1, 0, 2**40]])
def test_a_dimension_of_2_31_or_more_is_malformed_not_a_numpy_error(shape):
    message = _message([_f32("w", shape, [0, 0])], b"")
    with pytest.raises(MalformedMessageError, match="dimension"):
        decode_message(message, key=TEST_KEY)


def test_payload_segments_must_be_contiguous():
    # Two 4-byte tensors with 12 bytes between them (the encoder pads to 8-byte alignment only).
    payload = np.float32(1.0).tobytes() + bytes(12) + np.float32(2.0).tobytes()
    message = _message([_f32("a", [1], [0, 4]), _f32("b", [1], [16, 4])], payload)
    with pytest.raises(MalformedMessageError, match="gap"):
        decode_message(message, key=TEST_KEY)
    # The encoder's own layout (alignment padding only) still decodes.
    genuine = encode_message(
        {"a": np.ones(1, np.float32), "b": np.ones(3, np.float32)},
        version=1,
        learner_step=1,
        precision="fp32",
        comm_bits=32,
        key=TEST_KEY,
    )
    assert set(decode_message(genuine, key=TEST_KEY).tensors) == {"a", "b"}


def test_a_message_over_the_size_cap_is_refused_before_the_hmac_runs(monkeypatch):
    message = encode_message(
        {"w": np.ones((64, 64), np.float32)},
        version=1,
        learner_step=1,
        precision="fp32",
        comm_bits=32,
        key=TEST_KEY,
    )
    macs = []
    real = signing.verify
    monkeypatch.setattr(signing, "verify", lambda *a: macs.append(1) or real(*a))
    monkeypatch.setattr("actorq.quantize.codec.verify", signing.verify)
    with pytest.raises(MalformedMessageError, match="larger than"):
        read_header(message, key=TEST_KEY, max_bytes=message.size - 1)
    assert macs == []
    assert read_header(message, key=TEST_KEY, max_bytes=message.size).version == 1
    assert macs == [1]
