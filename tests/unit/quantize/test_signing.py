"""Signed weight messages (actorq.quantize.signing + the codec's auth fields): what verifies and what does not.

A forged message here is one an attacker who reaches the replay port can build: well formed, with a correct
crc32, carrying whatever weights, version and run id it likes, and either no signature or one made with a key that
is not the run's. Every such message must fail with UnauthenticatedMessageError before anything in it is parsed;
the run's own messages must keep decoding exactly as before.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorq.quantize.codec import (
    LegacyUnsignedMessageError,
    MalformedMessageError,
    UnauthenticatedMessageError,
    WeightMessageError,
    decode_message,
    encode_message,
    read_header,
)
from actorq.quantize.signing import (
    KEY_BYTES,
    LEARNER_STREAM,
    POLICY_STREAM,
    TAG_BYTES,
    WeightsKey,
    generate_key,
    key_from_text,
    key_to_text,
    run_id_of,
    sign,
    verify,
)
from tests.messages import PRE, TEST_KEY, rebuild, resign, seal, split

STATE = {
    "fc.weight": np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32),
    "fc.bias": np.zeros(16, np.float32),
}


def signed(key=TEST_KEY, version=7, stream=POLICY_STREAM, **kw) -> np.ndarray:
    args = {"version": version, "learner_step": 100, "precision": "int8", "comm_bits": 8} | kw
    return encode_message(STATE, key=key, stream=stream, **args)


# -- the maths ----------------------------------------------------------------------------------------------------
def test_tag_is_hmac_sha256_with_the_derived_stream_key():
    data = b"weights" * 100
    stream_key = hmac.new(TEST_KEY.secret, b"actorq weights stream\0policy", hashlib.sha256).digest()
    assert sign(TEST_KEY, POLICY_STREAM, data) == hmac.new(stream_key, data, hashlib.sha256).digest()
    assert len(sign(TEST_KEY, POLICY_STREAM, data)) == TAG_BYTES
    assert sign(TEST_KEY, POLICY_STREAM, data) != sign(TEST_KEY, LEARNER_STREAM, data)
    assert verify(TEST_KEY, POLICY_STREAM, memoryview(data), sign(TEST_KEY, POLICY_STREAM, data))
    assert not verify(TEST_KEY, POLICY_STREAM, data + b"!", sign(TEST_KEY, POLICY_STREAM, data))
    with pytest.raises(ValueError, match="unknown stream"):
        sign(TEST_KEY, "experience", data)


def test_run_id_is_a_one_way_fingerprint_and_keys_never_show_in_repr():
    key = generate_key()
    assert key.run_id == run_id_of(key.secret) == hashlib.sha256(b"actorq run id\0" + key.secret).digest()[:8]
    assert generate_key().run_id != key.run_id
    for text in (repr(key), str(key)):
        assert key.secret.hex() not in text and repr(key.secret) not in text
    with pytest.raises(ValueError):
        WeightsKey(b"short")


def test_key_text_round_trip_and_errors_never_quote_the_content():
    key = generate_key()
    text = key_to_text(key)
    assert len(text.strip()) == 2 * KEY_BYTES
    assert key_from_text("  " + text + "\n\n") == key
    for bad in ("", text[:-3], "zz" + text.strip()[2:], text.strip() + "00"):
        with pytest.raises(ValueError) as err:
            key_from_text(bad)
        assert not bad.strip() or bad.strip()[:16] not in str(err.value)


# -- messages -----------------------------------------------------------------------------------------------------
def test_signed_message_round_trips_and_names_its_run():
    msg = signed()
    out = decode_message(msg, key=TEST_KEY)
    assert out.version == 7
    np.testing.assert_array_equal(out.tensors["fc.bias"].data, STATE["fc.bias"])
    header = read_header(msg, key=TEST_KEY)
    assert (header.signed, header.run_id) == (True, TEST_KEY.run_id_hex)
    # The tag is HMAC over every byte before it, as tests/messages.py restates the format independently.
    assert bytes(msg) == seal(bytes(msg)[: -4 - TAG_BYTES], TEST_KEY)
    assert (
        read_header(encode_message(STATE, version=1, learner_step=0, precision="fp32", comm_bits=32)).signed
        is False
    )


def _unauthenticated(buf, match: str, key=TEST_KEY, stream=POLICY_STREAM) -> None:
    with pytest.raises(UnauthenticatedMessageError, match=match):
        decode_message(buf, key=key, stream=stream)
    with pytest.raises(UnauthenticatedMessageError, match=match):
        read_header(buf, key=key, stream=stream)


def test_forged_message_with_valid_crc_and_no_signature_is_rejected():
    forged = resign(signed(version=10**6), key=None)  # well formed, correct crc, no tag
    assert (
        decode_message(forged).version == 10**6
    )  # it is a valid message: only the missing signature stops it
    _unauthenticated(forged, "unsigned")
    # The same, claiming to be signed (auth 1) but with the run's id and no tag or a zero tag.
    _unauthenticated(resign(signed(), key=None, auth=1, run_id=TEST_KEY.run_id), "signature does not match")
    body = bytes(resign(signed(), key=None, auth=1, run_id=TEST_KEY.run_id))
    _unauthenticated(body + bytes(TAG_BYTES), "signature does not match")


def test_wrong_key_other_run_and_other_stream_are_rejected():
    other = generate_key()
    _unauthenticated(signed(key=other), f"names run {other.run_id_hex}.*key is for run {TEST_KEY.run_id_hex}")
    # An attacker who knows the run id (it is public) but not the key: right id, wrong tag.
    _unauthenticated(resign(signed(), key=other, run_id=TEST_KEY.run_id), "signature does not match")
    # A learner message copied into the policy table, and the reverse.
    _unauthenticated(signed(stream=LEARNER_STREAM), "policy message's .* signature does not match")
    _unauthenticated(signed(), "learner message's .* signature", stream=LEARNER_STREAM)
    assert decode_message(signed(stream=LEARNER_STREAM), key=TEST_KEY, stream=LEARNER_STREAM).version == 7


def test_signature_cannot_be_stripped_or_moved():
    msg = bytearray(signed())
    # Flip auth to 0 and drop the tag: the reader requires a signature, so this is "unsigned", not accepted.
    stripped = bytearray(resign(msg, key=None))
    _unauthenticated(bytes(stripped), "unsigned")
    # A valid tag appended to a different body (version bumped) does not verify.
    header, payload = split(msg)
    header["version"] = 8
    tampered = rebuild(header, payload, key=None, auth=1, run_id=TEST_KEY.run_id) + bytes(msg[-TAG_BYTES:])
    _unauthenticated(tampered, "signature does not match")


VALID = bytes(signed(comm_bits=4))


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, len(VALID) - 1), flip=st.integers(1, 255))
def test_any_changed_byte_fails_authentication_first(pos, flip):
    bad = bytearray(VALID)
    bad[pos] ^= flip
    with pytest.raises(WeightMessageError) as err:
        decode_message(bytes(bad), key=TEST_KEY)
    # Only the 6 bytes read before authentication (magic, format version) can fail some other way.
    if pos >= 6:
        assert isinstance(err.value, UnauthenticatedMessageError)


def test_unknown_auth_scheme_is_malformed_without_a_key_and_unauthenticated_with_one():
    weird = resign(signed(), key=None, auth=7)
    with pytest.raises(MalformedMessageError, match="auth scheme"):
        decode_message(weird)
    _unauthenticated(weird, "unsigned")


def test_format_1_is_the_legacy_error_for_every_reader():
    v1 = bytearray(signed())
    v1[4:6] = (1).to_bytes(2, "little")
    for key in (None, TEST_KEY):
        with pytest.raises(LegacyUnsignedMessageError, match="before weight signing"):
            decode_message(bytes(v1), key=key)


def test_header_prefix_is_what_the_tag_covers():
    """The preamble layout tests/messages.py restates is the codec's (else every crafted-message test is moot)."""
    msg = bytes(signed())
    magic, fver, auth, run_id, hlen, plen = PRE.unpack_from(msg)
    assert (magic, fver, auth, run_id) == (b"AQWM", 2, 1, TEST_KEY.run_id)
    assert len(msg) == PRE.size + hlen + plen + 4 + TAG_BYTES
