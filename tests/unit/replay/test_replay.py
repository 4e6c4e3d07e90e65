"""Reverb tables, weight pub/sub and the experience path, against an in-process server."""

from __future__ import annotations

import time

import numpy as np
import pytest

from actorq.quantize.codec import decode_message, encode_message
from actorq.replay import (
    EXPERIENCE_TABLE,
    LEARNER_WEIGHTS_TABLE,
    POLICY_TABLE,
    ReplayUnreachableError,
    ReverbWeightPublisher,
    ReverbWeightSubscriber,
    experience_inserts,
    wait_for_server,
)
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb


def test_weight_tables_hold_only_the_newest_message(reverb_server):
    server = reverb_server(tiny_config())
    client = wait_for_server(f"localhost:{server.port}", timeout_s=10)
    sub = ReverbWeightSubscriber(client, POLICY_TABLE, timeout_s=2)
    assert sub.latest() is None  # empty: returns at once instead of blocking
    pub = ReverbWeightPublisher(client, POLICY_TABLE)
    state = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    for version in (1, 2, 3):
        pub.publish(
            encode_message(state, version=version, learner_step=10 * version, precision="int8", comm_bits=8)
        )
    for _ in range(3):  # readable any number of times, always the newest
        message = decode_message(sub.latest())
        assert message.version == 3 and message.learner_step == 30
    info = client.server_info()
    assert info[POLICY_TABLE].current_size == 1 and info[LEARNER_WEIGHTS_TABLE].current_size == 0


def test_an_only_new_subscriber_downloads_each_message_once(reverb_server):
    """What the quantizer's poll relies on: no insert since the last fetch, no download; every insert is seen."""
    server = reverb_server(tiny_config())
    client = wait_for_server(f"localhost:{server.port}", timeout_s=10)
    sub = ReverbWeightSubscriber(client, LEARNER_WEIGHTS_TABLE, timeout_s=2, only_new=True)
    plain = ReverbWeightSubscriber(client, LEARNER_WEIGHTS_TABLE, timeout_s=2)
    pub = ReverbWeightPublisher(client, LEARNER_WEIGHTS_TABLE)
    state = {"w": np.ones((3, 4), np.float32)}
    assert sub.latest() is None
    seen = []
    for version in (1, 2, 3):
        pub.publish(
            encode_message(state, version=version, learner_step=version, precision="fp32", comm_bits=32)
        )
        seen.append(decode_message(sub.latest()).version)
        assert sub.latest() is None and sub.latest() is None  # nothing new: nothing downloaded
        assert decode_message(plain.latest()).version == version  # the table still holds it for everyone else
    assert seen == [1, 2, 3]
    sampled = client.server_info()[LEARNER_WEIGHTS_TABLE].rate_limiter_info.sample_stats.completed
    # Three fetches by each subscriber; the six polls that found nothing new sampled nothing.
    assert sampled == 6
    # Two inserts between polls: the newest is returned, once.
    for version in (4, 5):
        pub.publish(
            encode_message(state, version=version, learner_step=version, precision="fp32", comm_bits=32)
        )
    assert decode_message(sub.latest()).version == 5 and sub.latest() is None
    # refetch (the actor bench's fresh pulls): the same message once more, then nothing new again.
    sub.refetch()
    assert decode_message(sub.latest()).version == 5 and sub.latest() is None


def test_publisher_rejects_non_codec_payloads(reverb_server):
    server = reverb_server(tiny_config())
    pub = ReverbWeightPublisher(wait_for_server(f"localhost:{server.port}"), POLICY_TABLE)
    with pytest.raises(TypeError, match="uint8"):
        pub.publish(np.zeros(4, np.float32))


def test_adder_writes_nstep_transitions(reverb_server):
    from actorq.envs import make_environment
    from actorq.replay.experience import make_adder

    config = tiny_config()
    server = reverb_server(config)
    client = wait_for_server(f"localhost:{server.port}")
    adder = make_adder(client, config)
    env = make_environment(config.env, seed=0)
    ts = env.reset()
    adder.add_first(ts)
    steps = 0
    while steps < 30:
        action = np.int32(steps % 2)
        ts = env.step(action)
        adder.add(action, ts)
        steps += 1
        if ts.last():
            ts = env.reset()
            adder.add_first(ts)
    adder.reset()
    inserted, _ = experience_inserts(client)
    assert inserted >= 25  # one n-step transition per step (n=1 here)
    assert client.server_info()[EXPERIENCE_TABLE].current_size == inserted


def test_unreachable_address_fails_fast_with_a_clear_error():
    started = time.monotonic()
    with pytest.raises(ReplayUnreachableError, match="did not answer.*Check that the replay role is running"):
        wait_for_server("localhost:1", timeout_s=2)
    assert time.monotonic() - started < 15
    with pytest.raises(ReplayUnreachableError, match="HOST:PORT"):
        wait_for_server("nowhere", timeout_s=1)
