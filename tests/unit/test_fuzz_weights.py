"""Fuzzing the weight-message path of an actor: hostile bytes never crash it and never change its policy.

Each case feeds one message through the actor's real pull path (``QuantizedActor.update`` -> ``read_header``
(authenticating with the run's key) -> ``decode_message`` -> ``ActorPolicy.apply``) from a subscriber that
returns whatever the case built: random bytes, truncations, bit flips, messages for another network, NaN/Inf
weights, replayed old versions, and forgeries (well formed with a valid crc but unsigned, signed with another key,
or carrying a copied tag). The actor must not raise, must keep its version and its outputs bit for bit, and must
count each rejection. A valid newer message is the control: it is applied and changes the outputs, so the
"unchanged" assertions can fail. Signing is on, as in a run: messages that should reach the deeper checks (another
network, NaN/Inf) are signed with the run's key, as a buggy or diverged but authentic sender would sign them.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorq.actors.actor import QuantizedActor
from actorq.actors.policy import ActorPolicy
from actorq.networks.mapping import torch_state_shapes
from actorq.quantize.codec import (
    UnauthenticatedMessageError,
    WeightMessageError,
    decode_message,
    encode_message,
)
from actorq.quantize.signing import generate_key
from tests.conftest import tiny_config
from tests.messages import TEST_KEY, patch_payload, resign, split
from tests.waiting import wait_until

OBS_DIM, OUT_DIM, LAYERS = 4, 2, (32, 32)
APPLIED_VERSION = 5
OTHER_RUN_KEY = generate_key()
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


def _message(version: int, comm_bits: int = 8, seed: int = 0, key=TEST_KEY, **net) -> np.ndarray:
    return encode_message(
        _state(seed, **net),
        version=version,
        learner_step=100 * version,
        precision="int8",
        comm_bits=comm_bits,
        key=key,
    )


def _with_value(message: np.ndarray, value: float) -> np.ndarray:
    """A copy of an fp32/q message whose first float (f32 datum or q scale) is ``value``, crc and tag fixed up.

    This is what a diverged learner would produce: authentic and intact, but not finite.
    """
    record = split(message)[0]["tensors"][0]
    offset = (record["scale"] or record["data"])[0]
    return np.frombuffer(patch_payload(message, offset, struct.pack("<f", value)), np.uint8)


OBSERVATIONS = np.random.default_rng(7).standard_normal((8, OBS_DIM)).astype(np.float32)
BASE = {bits: _message(APPLIED_VERSION, bits) for bits in (32, 16, 8, 4)}


@pytest.fixture(scope="module")
def actor_setup():
    config = tiny_config("dqn")
    policy = ActorPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber, actor_id=0, seed=0, key=TEST_KEY)
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
    newer = st.tuples(bits, st.integers(APPLIED_VERSION + 1, 2**40), st.integers(0, 3))
    unsigned = newer.map(lambda t: ("unsigned", _message(t[1], t[0], seed=t[2] + 1, key=None)))
    other_run = newer.map(lambda t: ("other_run", _message(t[1], t[0], seed=t[2] + 1, key=OTHER_RUN_KEY)))
    # The run id is public (it is in every message): a forger can copy it, and the applied message's tag too.
    copied_tag = newer.map(
        lambda t: (
            "copied_tag",
            np.concatenate(
                [
                    np.frombuffer(
                        resign(_message(t[1], t[0], seed=t[2] + 1), key=None, auth=1, run_id=TEST_KEY.run_id),
                        np.uint8,
                    ),
                    BASE[t[0]][-32:],
                ]
            ),
        )
    )
    forged = st.one_of(unsigned, other_run, copied_tag)
    return st.one_of(random_bytes, truncated, flipped, wrong_shape, non_finite, old, forged)


@FUZZ
@given(case=_mutations())
def test_rejected_messages_never_crash_or_change_the_policy(actor_setup, case):
    kind, buffer = case
    rejected, changed = _feed(actor_setup, buffer)
    assert not changed, f"{kind} message changed the policy"
    assert rejected == 1, f"{kind} message was not counted as rejected"
    assert actor_setup[0].weights.last_error
    if kind in ("unsigned", "other_run", "copied_tag", "old_version"):
        assert actor_setup[0].weights.last_error.startswith(UnauthenticatedMessageError.__name__), kind


def test_replaying_the_applied_version_is_ignored_not_counted(actor_setup):
    # The same message arrives again on every pull until a newer one is published: not an error.
    rejected, changed = _feed(actor_setup, BASE[8])
    assert (rejected, changed) == (0, False)


def test_a_valid_newer_message_is_applied_and_changes_outputs():
    config = tiny_config("dqn")
    policy = ActorPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber, key=TEST_KEY)
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
            decode_message(buffer, expected=expected, key=TEST_KEY)


def test_async_updater_counts_rejections_and_keeps_weights():
    """The background updater thread takes the same path: bad messages counted, the good one installed."""
    config = tiny_config("dqn", **{"actor.async_update": True})
    policy = ActorPolicy("dqn", OBS_DIM, OUT_DIM, LAYERS, precision="int8")
    subscriber = StaticSubscriber()
    actor = QuantizedActor(config, policy, None, subscriber, key=TEST_KEY)
    try:
        subscriber.buffer = BASE[8]
        assert actor.wait_for_weights(timeout_s=10)
        before = policy(OBSERVATIONS).copy()
        forged = _message(9, 8, key=None)
        for bad in (BASE[8][:-3], _with_value(_message(9, 32), np.nan), _message(2, 8), forged):
            subscriber.buffer = bad
            target = actor.weights.rejected + 1
            # Pull now, as often as it takes (bounded), until the bad message is counted as rejected.
            wait_until(
                lambda target=target: actor.update(wait=True) or actor.weights.rejected >= target,
                10,
                "the updater thread to reject the message",
                poll_s=0.02,
            )
            assert actor.weights.rejected == target
            assert np.array_equal(policy(OBSERVATIONS), before)
        subscriber.buffer = _message(APPLIED_VERSION + 1, 8, seed=4)
        wait_until(
            lambda: actor.update(wait=True) or actor.weights.version == APPLIED_VERSION + 1,
            10,
            "the updater thread to install the good message",
            poll_s=0.02,
        )
        assert actor.weights.version == APPLIED_VERSION + 1 and actor.weights.rejected == 4
    finally:
        actor.close()
