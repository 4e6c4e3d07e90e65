"""DQN's learner trains the conv Q-network on uint8 frames from replay, and its weights reach an int8 actor.

A Reverb server with an image task's signature (44x44x4 uint8 frames) is filled through the actors' n-step adder;
the learner (``network.torso: auto``) builds the Nature CNN from the observation's rank, samples raw frames (the
network casts and scales them), steps, and the variables it publishes go through the quantizer's mapping into an
int8 actor policy that computes the learner's Q-values within DQN's int8 bound.
"""

from __future__ import annotations

import dm_env
import numpy as np
import pytest

from actorq.config import replace
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb

FRAME = (44, 44, 4)
ACTIONS = 3


def image_spec():
    from acme import specs
    from dm_env import specs as dm_specs

    return specs.EnvironmentSpec(
        observations=dm_specs.BoundedArray(FRAME, np.uint8, 0, 255, name="observation"),
        actions=dm_specs.DiscreteArray(ACTIONS, dtype=np.int32, name="action"),
        rewards=dm_specs.Array((), np.float32, name="reward"),
        discounts=dm_specs.BoundedArray((), np.float32, 0.0, 1.0, name="discount"),
    )


def test_the_learner_trains_a_conv_network_on_uint8_frames_and_an_int8_actor_runs_it():
    import tensorflow as tf

    from actorq.actors.policy import ActorPolicy
    from actorq.algorithms import dqn
    from actorq.algorithms.dqn.tf_networks import ConvQNetwork
    from actorq.learners import make_learner
    from actorq.quantize.codec import encode_message
    from actorq.replay import make_server
    from actorq.replay.experience import make_adder
    from actorq.roles.quantizer import learner_state

    config = replace(
        tiny_config("dqn"), **{"network.policy_layers": (32,), "replay.min_size": 20, "learner.batch_size": 8}
    )
    spec = image_spec()
    server = make_server(config, spec, port=None)
    try:
        rng = np.random.default_rng(0)
        adder = make_adder(server.localhost_client(), config)
        frames = rng.integers(0, 256, (40, *FRAME), dtype=np.uint8)
        adder.add_first(dm_env.restart(frames[0]))
        for i in range(1, len(frames)):
            step = dm_env.transition(np.float32(rng.standard_normal()), frames[i], np.float32(0.99))
            adder.add(np.int32(i % ACTIONS), step)
        adder.writer.flush(timeout_ms=30_000)

        learner = make_learner(config, spec, f"localhost:{server.port}")
        network = learner.policy_module
        assert isinstance(network, ConvQNetwork)
        before = learner.get_variables()
        for _ in range(3):
            learner.step()
        after = learner.get_variables()
        assert "q_network/conv_0/w" in after and after["q_network/conv_0/w"].shape == (8, 8, 4, 32)
        assert not np.array_equal(before["q_network/conv_0/w"], after["q_network/conv_0/w"])  # it learned

        torso = dqn.ALGORITHM.torso("auto", FRAME, np.uint8)
        published = encode_message(after, version=1, learner_step=3, precision="fp32", comm_bits=32)
        _, state = learner_state(config, published, torso)
        policy = ActorPolicy("dqn", int(np.prod(FRAME)), ACTIONS, (32,), "int8", use_cache=False, torso=torso)
        policy.load_state(state)
        expected = network(tf.constant(frames[:16])).numpy()
        got = policy(frames[:16])
        assert np.abs(got - expected).max() <= dqn.BOUNDS["int8"] * np.abs(expected).max()
    finally:
        server.stop()
