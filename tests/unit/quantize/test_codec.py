"""Weight-message codec (actorq.quantize.codec): round trips, sizes, and every corruption path.

Messages are signed, as in a run, and decoded with the key (:func:`decode`), so the deeper checks are exercised
behind a valid signature (what a buggy but authentic sender could produce); the unsigned path, which only
``--insecure-weights`` runs take, is exercised where it differs (crc and length checks). Signature-specific cases
are in test_signing.py.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from actorq.quantize import (
    MESSAGE_VERSION,
    ChecksumMismatchError,
    MalformedMessageError,
    MissingTensorError,
    NonFiniteWeightsError,
    ShapeMismatchError,
    TruncatedMessageError,
    UnauthenticatedMessageError,
    UnknownTensorError,
    UnsupportedVersionError,
    WeightMessageError,
    decode_message,
    encode_message,
    fake_quantize,
    read_header,
    to_fp16,
)
from actorq.quantize.codec import LegacyUnsignedMessageError
from tests.messages import PRE, TEST_KEY, patch_payload, rebuild, split

SHAPES = {
    "fc1.weight": (16, 8),
    "fc1.bias": (16,),
    "ln.scale": (16,),
    "out.weight": (3, 16),
    "out.bias": (3,),
}


def make_state(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(s) * 0.3).astype(np.float32) for n, s in SHAPES.items()}


def encode(state=None, **kw) -> np.ndarray:
    args = {"version": 3, "learner_step": 1234, "precision": "int8", "comm_bits": 8, "key": TEST_KEY} | kw
    return encode_message(make_state() if state is None else state, **args)


def decode(buf, expected=None):
    """Decode as a role of the test key's run does: authenticate first."""
    return decode_message(buf, expected=expected, key=TEST_KEY)


def record(msg, name: str) -> dict:
    return next(t for t in split(msg)[0]["tensors"] if t["name"] == name)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("comm_bits", [32, 16, 8, 7, 4, 3, 2])
def test_round_trip(comm_bits, compress, per_channel):
    state = make_state()
    msg = encode(state, comm_bits=comm_bits, compress=compress, per_channel=per_channel)
    assert msg.dtype == np.uint8 and msg.ndim == 1
    out = decode(msg, expected=SHAPES)
    assert (out.version, out.learner_step, out.precision, out.comm_bits, out.nbytes) == (
        3,
        1234,
        "int8",
        comm_bits,
        msg.size,
    )
    assert list(out.tensors) == list(SHAPES)
    got = out.float32_state()
    for name, x in state.items():
        t = out.tensors[name]
        assert t.shape == x.shape and got[name].dtype == np.float32 and got[name].shape == x.shape
        if comm_bits == 32 or (x.ndim < 2 and comm_bits != 16):
            assert t.encoding == "f32"
            np.testing.assert_array_equal(got[name], x)
        elif comm_bits == 16:
            assert t.encoding == "f16"
            np.testing.assert_array_equal(got[name], to_fp16(x).astype(np.float32))
        else:
            assert t.encoding == "q" and t.data.dtype == np.int8 and t.bits == comm_bits
            assert t.axis == (0 if per_channel else None)
            qmax = 2 ** (comm_bits - 1) - 1
            assert t.data.min() >= -qmax and t.data.max() <= qmax  # never -128 for int8
            expect = fake_quantize(x, comm_bits, symmetric=True, axis=0 if per_channel else None)
            np.testing.assert_array_equal(got[name], expect)
    hdr = read_header(msg, key=TEST_KEY)
    assert (hdr.version, hdr.learner_step, hdr.comm_bits, hdr.compressed) == (3, 1234, comm_bits, compress)
    assert (hdr.format_version, hdr.num_tensors, hdr.nbytes) == (MESSAGE_VERSION, len(SHAPES), msg.size)
    assert (hdr.signed, hdr.run_id) == (True, TEST_KEY.run_id_hex)


@settings(max_examples=50, deadline=None)
@given(
    shapes=st.lists(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5), max_size=4),
    comm_bits=st.sampled_from([32, 16, 8, 6, 5, 4, 2]),
    compress=st.booleans(),
    per_channel=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_trip_random_states(shapes, comm_bits, compress, per_channel, seed):
    rng = np.random.default_rng(seed)
    state = {
        f"t{i}": (rng.standard_normal(s) * 10.0 ** rng.integers(-6, 4)).astype(np.float32)
        for i, s in enumerate(shapes)
    }
    msg = encode(state, comm_bits=comm_bits, compress=compress, per_channel=per_channel)
    got = decode(msg, expected={k: v.shape for k, v in state.items()}).float32_state()
    for name, x in state.items():
        if comm_bits == 16:
            expect = to_fp16(x).astype(np.float32)
        elif comm_bits == 32 or x.ndim < 2:
            expect = x
        else:
            expect = fake_quantize(x, comm_bits, axis=0 if per_channel else None)
        np.testing.assert_array_equal(got[name], expect)


def test_accepts_all_buffer_types_and_empty_edge_cases():
    msg = encode()
    for buf in (bytes(msg), bytearray(msg), memoryview(bytes(msg)), msg, msg.reshape(-1, 1)[:, 0]):
        assert decode(buf).learner_step == 1234
    empty = encode_message(
        {}, version=0, learner_step=0, precision="fp32", comm_bits=4, compress=True, key=TEST_KEY
    )
    assert decode(empty, expected={}).tensors == {}
    odd = {
        "s": np.float32(2.5),
        "e": np.zeros((0, 3), np.float32),
        "c": np.full((2, 3), -4.0),
        "i": np.array([[7, -7, 0], [1, 1, 1]]),
    }
    out = decode(encode(odd, comm_bits=4)).float32_state()
    for name, x in odd.items():
        np.testing.assert_array_equal(out[name], np.asarray(x, np.float32))
    with pytest.raises(TypeError):
        decode("not bytes")


def test_message_sizes_for_3x2048_policy():
    shapes = [(2048, 24), (2048,), (2048, 2048), (2048,), (2048, 2048), (2048,), (6, 2048), (6,)]
    rng = np.random.default_rng(0)
    state = {f"t{i}": rng.standard_normal(s, dtype=np.float32) * 0.05 for i, s in enumerate(shapes)}
    sizes = {b: encode(state, comm_bits=b).size for b in (32, 8, 4)}
    assert sizes[8] <= 0.26 * sizes[32] and sizes[4] <= 0.14 * sizes[32]


def test_compression_shrinks_quantized_payload():
    state = {"w": np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)}
    assert encode(state, compress=True).size < encode(state).size


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("comm_bits", [32, 16, 8])
def test_encode_rejects_non_finite(bad, comm_bits):
    state = make_state()
    state["fc1.weight"][3, 2] = bad
    with pytest.raises(NonFiniteWeightsError, match="fc1.weight"):
        encode(state, comm_bits=comm_bits)


def test_encode_rejects_fp16_overflow_and_bad_arguments():
    with pytest.raises(NonFiniteWeightsError, match="float16"):
        encode({"w": np.array([[1e6]], np.float32)}, comm_bits=16)
    for kw in (
        {"comm_bits": 12},
        {"comm_bits": 1},
        {"version": -1},
        {"learner_step": 1.5},
        {"precision": ""},
    ):
        with pytest.raises(ValueError):
            encode(**kw)
    with pytest.raises(ValueError):
        encode({"": np.zeros(2, np.float32)})
    with pytest.raises(TypeError):
        encode({"w": np.array(["a"])})


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("signed", [False, True])
def test_truncation_anywhere_is_detected(compress, signed):
    msg = bytes(encode(compress=compress, key=TEST_KEY if signed else None))
    hlen = PRE.unpack_from(msg)[4]
    cuts = [
        0,
        3,
        10,
        PRE.size,
        PRE.size + hlen // 2,
        PRE.size + hlen + 5,
        len(msg) // 2,
        len(msg) - 4,
        len(msg) - 1,
    ]
    for cut in cuts:
        # Read without a key, lengths are what catch it; with the run's key, a cut message loses (part of)
        # its tag first, so it is refused before its lengths are even read.
        with pytest.raises(TruncatedMessageError):
            decode_message(msg[:cut])
        with pytest.raises(TruncatedMessageError):
            read_header(msg[:cut])
        if signed:
            with pytest.raises((TruncatedMessageError, UnauthenticatedMessageError)):
                decode(msg[:cut])


@pytest.mark.parametrize("compress", [False, True])
def test_flipped_bytes_fail_the_checksum_or_the_signature(compress):
    unsigned = bytes(encode(compress=compress, key=None))
    signed = bytes(encode(compress=compress))
    hlen = PRE.unpack_from(unsigned)[4]
    for pos in (
        PRE.size + 1,
        PRE.size + hlen // 2,
        PRE.size + hlen + 3,
        len(unsigned) - 10,
        len(unsigned) - 2,
    ):
        bad = bytearray(unsigned)
        bad[pos] ^= 0x5A
        with pytest.raises(ChecksumMismatchError):
            decode_message(bad)  # an --insecure-weights run: the crc is all there is
        bad = bytearray(signed)
        bad[pos] ^= 0x5A
        with pytest.raises(UnauthenticatedMessageError):
            decode(bad)


def test_bad_magic_version_and_trailing_bytes():
    msg = bytearray(encode())
    with pytest.raises(MalformedMessageError, match="not an ActorQ"):
        decode(b"XXXX" + bytes(msg[4:]))
    struct.pack_into("<H", msg, 4, MESSAGE_VERSION + 1)
    with pytest.raises(UnsupportedVersionError, match=f"version {MESSAGE_VERSION + 1}"):
        decode(msg)
    with pytest.raises(UnsupportedVersionError):
        read_header(msg)
    with pytest.raises(MalformedMessageError, match="unexpected bytes"):
        decode_message(bytes(encode()) + b"\0")
    with pytest.raises(UnauthenticatedMessageError):
        decode(bytes(encode()) + b"\0")  # the last 32 bytes are no longer the tag


def test_format_1_messages_get_their_own_error():
    """The unsigned format of earlier builds: a specific error, whether or not the reader holds a key."""
    v1 = struct.pack("<4sHIQ", b"AQWM", 1, 8, 0) + b"{}      " + b"\0" * 4
    for read in (decode, decode_message, read_header):
        with pytest.raises(LegacyUnsignedMessageError, match="format version 1 is unsigned") as err:
            read(v1)
        assert isinstance(err.value, UnauthenticatedMessageError) and isinstance(
            err.value, UnsupportedVersionError
        )


def test_expected_names_and_shapes():
    msg = encode()
    wrong = dict(SHAPES, **{"fc1.weight": (2048, 8)})
    with pytest.raises(ShapeMismatchError, match=r"'fc1.weight' has shape \(16, 8\).*expects \(2048, 8\)"):
        decode(msg, expected=wrong)
    with pytest.raises(UnknownTensorError, match="ln.scale"):
        decode(msg, expected={k: v for k, v in SHAPES.items() if k != "ln.scale"})
    with pytest.raises(MissingTensorError, match="extra.weight"):
        decode(msg, expected=dict(SHAPES, **{"extra.weight": (1, 1)}))


@pytest.mark.parametrize("comm_bits", [32, 16])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_decode_catches_non_finite_values_with_valid_crc(comm_bits, bad):
    msg = encode(comm_bits=comm_bits)
    rec = record(msg, "fc1.bias")
    raw = np.array([bad], np.float32 if comm_bits == 32 else np.float16).tobytes()
    with pytest.raises(NonFiniteWeightsError, match="fc1.bias"):
        decode(patch_payload(msg, rec["data"][0] + 4, raw))


def test_decode_catches_bad_scales_and_codes_with_valid_crc():
    msg = encode(comm_bits=8)
    off = record(msg, "fc1.weight")["scale"][0]
    with pytest.raises(NonFiniteWeightsError, match="fc1.weight"):
        decode(patch_payload(msg, off, np.float32(np.nan).tobytes()))
    with pytest.raises(MalformedMessageError, match="not positive"):
        decode(patch_payload(msg, off, np.float32(0.0).tobytes()))
    with pytest.raises(NonFiniteWeightsError):
        decode(patch_payload(msg, off, np.float32(1e38).tobytes()))
    data_off = record(msg, "fc1.weight")["data"][0]
    with pytest.raises(MalformedMessageError, match="outside"):
        decode(patch_payload(msg, data_off, b"\xff"))  # u = 255 would be code 128


def _mutations():
    def tensor(i, **kw):
        def f(h):
            h["tensors"][i].update(kw)

        return f

    return [
        lambda h: h.update(learner_step="5"),
        lambda h: h.update(version=-1),
        lambda h: h.update(comm_bits=12),
        lambda h: h.update(compressed=1),
        lambda h: h.update(precision=7),
        lambda h: h.update(payload_nbytes=h["payload_nbytes"] + 8),
        lambda h: h.update(extra=1),
        lambda h: h.pop("tensors"),
        lambda h: h.update(tensors={}),
        tensor(0, encoding="int3"),
        tensor(0, bits=9),
        tensor(0, bits=1),
        tensor(1, bits=16),
        tensor(0, shape=[16, -8]),
        tensor(0, shape=[16, 9]),
        tensor(0, shape="16x8"),
        tensor(0, axis=2),
        tensor(0, scale=None),
        tensor(0, data=[0, -3]),
        tensor(0, data=[1, 128]),
        tensor(1, data=[10**12, 64]),
        tensor(1, scale=[0, 4]),
        tensor(1, name=None),
        tensor(1, name="fc1.weight"),
        lambda h: h["tensors"][0].pop("axis"),
        lambda h: h["tensors"].append(h["tensors"][1] | {"name": "dup.bias"}),
    ]


@pytest.mark.parametrize("mutate", _mutations())
def test_malformed_headers_with_valid_crc(mutate):
    header, payload = split(encode(comm_bits=8))
    mutate(header)
    with pytest.raises(MalformedMessageError):
        decode(rebuild(header, payload))


@pytest.mark.parametrize(
    "raw", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"a": NaN}', b"[" * 100000, b"1" * 5000]
)
def test_unparseable_headers(raw):
    with pytest.raises(MalformedMessageError):
        decode(rebuild(None, b"", raw_header=raw))


def test_zip_bomb_and_lying_sizes_are_bounded():
    header, _ = split(encode(make_state(), comm_bits=32, compress=True))
    # A stream inflating to far more than declared: decoding stops at the declared size and refuses.
    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    with pytest.raises(MalformedMessageError, match="declared"):
        decode(rebuild(header, bomb))
    with pytest.raises(MalformedMessageError, match="implausible"):
        decode(rebuild(dict(header, payload_nbytes=1 << 40), bomb))
    with pytest.raises(MalformedMessageError, match="corrupt"):
        decode(rebuild(header, b"\x78\x9c garbage"))
    # Declared-size shortfall: stream shorter than payload_nbytes.
    with pytest.raises(MalformedMessageError):
        decode(rebuild(header, zlib.compress(b"\0" * 16)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=512))
def test_random_bytes_only_raise_message_errors(data):
    for buf in (data, b"AQWM\x01\x00" + data, b"AQWM\x02\x00" + data, b"AQWM\x02\x00\x01\x00" + data):
        with pytest.raises(WeightMessageError):
            decode(buf)
        with pytest.raises(WeightMessageError):
            decode_message(buf)


VALID = bytes(encode(comm_bits=4, compress=False))


@settings(max_examples=150, deadline=None)
@given(pos=st.integers(0, len(VALID) - 1), val=st.integers(0, 255), cut=st.integers(0, len(VALID)))
def test_mutated_messages_only_raise_message_errors(pos, val, cut):
    bad = bytearray(VALID)
    bad[pos] = val
    for buf in (bytes(bad), VALID[:cut]):
        if buf == VALID:  # an unchanged byte or no cut: the message must still decode
            assert set(decode(buf, expected=SHAPES).tensors) == set(SHAPES)
            continue
        # The tag and crc32 cover every byte: any change or cut must be refused, never decoded.
        with pytest.raises(WeightMessageError):
            decode(buf)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(sorted(record(VALID, "fc1.weight"))), top=st.booleans(), value=JSON)
def test_fuzzed_header_fields_only_raise_message_errors(key, top, value):
    header, payload = split(VALID)
    if top:
        header[key if key in header else "comm_bits"] = value
    else:
        header["tensors"][0][key] = value
    try:
        message = decode(rebuild(header, payload), expected=SHAPES)
    except WeightMessageError:
        return
    # Accepted (e.g. a field set to its own value, or one the reader ignores): then it must be a whole, sound message.
    state = message.float32_state()
    assert {k: v.shape for k, v in state.items()} == SHAPES
    assert all(np.isfinite(v).all() for v in state.values())
