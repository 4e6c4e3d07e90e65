"""Fuzzing the weight-message path of an actor: hostile bytes never crash it and never change its policy.

Each case feeds one message through the actor's real pull path (``QuantizedActor.update`` -> ``read_header`` ->
``decode_message`` -> ``QuantizedPolicy.apply``) from a subscriber that returns whatever the case built: random
bytes, truncations, bit flips, messages for another network, NaN/Inf weights, replayed old versions. The actor must
not raise, must keep its version and its outputs bit for bit, and must count each rejection. A valid newer message
is the control: it is applied and changes the outputs, so the "unchanged" assertions can fail.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorq.actors.actor import QuantizedActor
from actorq.actors.policy import QuantizedPolicy
from actorq.networks.mapping import torch_state_shapes
from actorq.quantize.codec import WeightMessageError, decode_message, encode_message
from tests.conftest import tiny_config

OBS_DIM, OUT_DIM, LAYERS = 4, 2, (32, 32)
APPLIED_VERSION = 5
_PRE = struct.Struct("<4sHIQ")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class StaticSubscriber:
    """A WeightSubscriber that returns whatever buffer the test put there."""

    def __init__(self) -> None:
        self.buffer: np.ndarray | None = None

    def latest(self, timeout_s: float | None = None) -> np.ndarray | None:
        return self.buffer


def _state(seed: int, obs_dim: int = OBS_DIM, out_dim: int = OUT_DIM, layers=LAYERS) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = torch_state_shapes("dqn", obs_dim, out_dim, layers)
    return {k: (rng.standard_normal(s) * 0.5).astype(np.float32) for k, s in shapes.items()}


def _message(version: int, comm_bits: int = 8, seed: int = 0, **net) -> np.ndarray:
    return encode_message(
        _state(seed, **net),
        version=version,
        learner_step=100 * version,
        precision="int8",
        comm_bits=comm_bits,
    )


def _with_value(message: np.ndarray, value: float) -> np.ndarray:
    """A copy of an fp32/q message whose first float (f32 datum or q scale) is ``value``, crc fixed up.

    This is what a diverged learner or a crafted sender would produce: integrity checks pass, contents don't.
    """
    buf = bytearray(message.tobytes())
    _, _, hlen, _ = _PRE.unpack_from(buf)
    header = json.loads(bytes(buf[_PRE.size : _PRE.size + hlen]))
    record = header["tensors"][0]
    offset = (record["scale"] or record["data"])[0]
    struct.pack_into("<f", buf, _PRE.size + hlen + offset, value)
    struct.pack_into("<I", buf, len(buf) - 4, zlib.crc32(bytes(buf[:-4])))
    return np.frombuffer(bytes(buf), np.uint8)


OBSERVATIONS = np.random.default_rng(7).standard_normal((8, OBS_DIM)).astype(np.float32)
BASE = {bits: _message(APPLIED_VERSION, bits) for bits in (32, 16, 8, 4)}


@pytest.fixture(scope="module")
def actor_setup():
    config = tiny_config("dqn")
    policy = QuantizedPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber, actor_id=0, seed=0)
    subscriber.buffer = BASE[8]
    actor.update(wait=True)
    assert actor.weights.version == APPLIED_VERSION
    return actor, policy, subscriber


def _feed(actor_setup, buffer: np.ndarray) -> tuple[int, bool]:
    """Offer ``buffer`` to the actor; return (rejections it counted, whether the policy changed)."""
    actor, policy, subscriber = actor_setup
    before = policy(OBSERVATIONS).copy()
    rejected, version = actor.weights.rejected, actor.weights.version
    subscriber.buffer = buffer
    actor.update(wait=True)  # must not raise
    changed = actor.weights.version != version or not np.array_equal(policy(OBSERVATIONS), before)
    return actor.weights.rejected - rejected, changed


def _mutations():
    bits = st.sampled_from(sorted(BASE))
    random_bytes = st.binary(max_size=4096).map(lambda b: ("random", np.frombuffer(b, np.uint8)))
    truncated = st.tuples(bits, st.floats(0, 1, exclude_max=True)).map(
        lambda t: ("truncated", BASE[t[0]][: int(t[1] * BASE[t[0]].size)])
    )

    def flip(args):
        b, positions = args
        out = BASE[b].copy()
        for p in positions:
            out[(p // 8) % out.size] ^= np.uint8(1 << (p % 8))
        return ("flipped", out) if not np.array_equal(out, BASE[b]) else ("flipped", out[:-1])

    flipped = st.tuples(bits, st.lists(st.integers(0, 1 << 24), min_size=1, max_size=4)).map(flip)
    other_net = st.sampled_from(
        [
            dict(obs_dim=5),
            dict(out_dim=3),
            dict(layers=(32, 16)),
            dict(layers=(32,)),
            dict(layers=(32, 32, 32)),
        ]
    )
    wrong_shape = st.tuples(bits, other_net).map(
        lambda t: ("wrong_shape", _message(APPLIED_VERSION + 10, t[0], **t[1]))
    )
    non_finite = st.tuples(st.sampled_from([32, 8, 4]), st.sampled_from([np.nan, np.inf, -np.inf])).map(
        lambda t: ("non_finite", _with_value(_message(APPLIED_VERSION + 10, t[0]), t[1]))
    )
    old = st.tuples(bits, st.integers(0, APPLIED_VERSION - 1), st.integers(0, 3)).map(
        lambda t: ("old_version", _message(t[1], t[0], seed=t[2] + 1))
    )
    return st.one_of(random_bytes, truncated, flipped, wrong_shape, non_finite, old)


@FUZZ
@given(case=_mutations())
def test_rejected_messages_never_crash_or_change_the_policy(actor_setup, case):
    kind, buffer = case
    rejected, changed = _feed(actor_setup, buffer)
    assert not changed, f"{kind} message changed the policy"
    assert rejected == 1, f"{kind} message was not counted as rejected"
    assert actor_setup[0].weights.last_error


def test_replaying_the_applied_version_is_ignored_not_counted(actor_setup):
    # The same message arrives again on every pull until a newer one is published: not an error.
    rejected, changed = _feed(actor_setup, BASE[8])
    assert (rejected, changed) == (0, False)


def test_a_valid_newer_message_is_applied_and_changes_outputs():
    config = tiny_config("dqn")
    policy = QuantizedPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber)
    subscriber.buffer = BASE[8]
    actor.update(wait=True)
    before = policy(OBSERVATIONS).copy()
    subscriber.buffer = _message(APPLIED_VERSION + 1, 8, seed=3)
    actor.update(wait=True)
    assert actor.weights.version == APPLIED_VERSION + 1 and actor.weights.rejected == 0
    assert not np.array_equal(policy(OBSERVATIONS), before)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2048), cut=st.integers(0, 4096))
def test_decoder_raises_only_weight_message_errors(data, cut):
    expected = torch_state_shapes("dqn", OBS_DIM, OUT_DIM, LAYERS)
    spliced = np.concatenate([BASE[8][: cut % BASE[8].size], np.frombuffer(data, np.uint8)])
    for buffer in (np.frombuffer(data, np.uint8), spliced, bytes(data)):
        with pytest.raises(WeightMessageError):
            decode_message(buffer, expected=expected)


def test_async_updater_counts_rejections_and_keeps_weights():
    """The background updater thread takes the same path: bad messages counted, the good one installed."""
    import time

    config = tiny_config("dqn", **{"actor.async_update": True})
    policy = QuantizedPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber)
    try:
        subscriber.buffer = BASE[8]
        assert actor.wait_for_weights(timeout_s=10)
        before = policy(OBSERVATIONS).copy()
        for bad in (BASE[8][:-3], _with_value(_message(9, 32), np.nan), _message(2, 8)):
            subscriber.buffer = bad
            target = actor.weights.rejected + 1
            deadline = time.monotonic() + 10
            while actor.weights.rejected < target and time.monotonic() < deadline:
                actor.update(wait=True)
                time.sleep(0.02)
            assert actor.weights.rejected == target
            assert np.array_equal(policy(OBSERVATIONS), before)
        subscriber.buffer = _message(APPLIED_VERSION + 1, 8, seed=4)
        deadline = time.monotonic() + 10
        while actor.weights.version != APPLIED_VERSION + 1 and time.monotonic() < deadline:
            actor.update(wait=True)
            time.sleep(0.02)
        assert actor.weights.version == APPLIED_VERSION + 1 and actor.weights.rejected == 3
    finally:
        actor.close()
