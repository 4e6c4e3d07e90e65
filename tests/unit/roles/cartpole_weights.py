"""Random weights for the tiny CartPole DQN of ``tiny_config("dqn")``, as the learner publishes them."""

from __future__ import annotations

import numpy as np

from actorq.networks.mapping import mapping_table, torch_state_shapes
from actorq.quantize.codec import encode_message
from actorq.quantize.signing import LEARNER_STREAM
from tests.messages import TEST_KEY

OBS, OUT = 4, 2  # CartPole


def torch_state(config, seed: int) -> dict[str, np.ndarray]:
    """Random torch-keyed policy weights for ``config``'s network."""
    rng = np.random.default_rng(seed)
    shapes = torch_state_shapes("dqn", OBS, OUT, tuple(config.network.policy_layers))
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def learner_message(config, seed: int, version: int = 1, learner_step: int = 40) -> np.ndarray:
    """Learner weights (TF names and layout, signed with the test key) whose torch form is
    ``torch_state(config, seed)``."""
    state = torch_state(config, seed)
    tf_state = {
        tf_name: state[key].T.copy() if transpose else state[key]
        for tf_name, key, transpose in mapping_table("dqn", tuple(config.network.policy_layers))
    }
    return encode_message(
        tf_state, version=version, learner_step=learner_step, precision="fp32", comm_bits=32, key=TEST_KEY,
        stream=LEARNER_STREAM,
    )  # fmt: skip
