"""``evaluator.each_version_once``: each learner weight version is evaluated at most once, whatever the period."""

from __future__ import annotations

import time

import numpy as np
import pytest

from actorq.config import replace
from actorq.networks.mapping import mapping_table, torch_state_shapes
from actorq.quantize.codec import encode_message
from actorq.quantize.signing import LEARNER_STREAM
from actorq.replay import LEARNER_WEIGHTS_TABLE, ReverbWeightPublisher
from actorq.replay.client import new_client
from actorq.roles.evaluator import EvaluatorRole
from tests.conftest import tiny_config
from tests.messages import TEST_KEY

pytestmark = pytest.mark.reverb

OBS, OUT = 4, 2  # CartPole


def _learner_message(config, version: int, learner_step: int) -> np.ndarray:
    """Random learner weights (TF names and layout) for a tiny CartPole DQN."""
    rng = np.random.default_rng(version)
    shapes = torch_state_shapes("dqn", OBS, OUT, tuple(config.network.policy_layers))
    state = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    tf_state = {
        tf_name: state[key].T.copy() if transpose else state[key]
        for tf_name, key, transpose in mapping_table("dqn", tuple(config.network.policy_layers))
    }
    return encode_message(
        tf_state, version=version, learner_step=learner_step, precision="fp32", comm_bits=32, key=TEST_KEY,
        stream=LEARNER_STREAM,
    )  # fmt: skip


def _step_until(role: EvaluatorRole, done, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{role.evaluations} evaluations after {timeout_s} s"
        role.step()


@pytest.mark.parametrize("once", [True, False])
def test_each_weight_version_is_evaluated_once_when_asked(reverb_server, tmp_path, once):
    # A slow learner publishes rarely: evaluated every period, its one version fills the k evaluations the
    # threshold smooths over, where a fast learner's k evaluations span k versions.
    config = tiny_config("dqn")
    config = replace(
        config, evaluator=replace(config.evaluator, episodes=1, period_s=0.05, each_version_once=once)
    )
    server = reverb_server(config)
    address = f"localhost:{server.port}"
    publisher = ReverbWeightPublisher(new_client(address), LEARNER_WEIGHTS_TABLE)
    publisher.publish(_learner_message(config, version=1, learner_step=50))
    role = EvaluatorRole(config, tmp_path, address, connect_timeout_s=10, weights_key=TEST_KEY)
    polls = 0
    latest = role._learner_sub.latest

    def counted(*args, **kwargs):
        nonlocal polls
        polls += 1
        return latest(*args, **kwargs)

    role._learner_sub.latest = counted
    try:
        _step_until(role, lambda: role.evaluations >= 1)
        first = polls
        _step_until(role, lambda: polls >= first + 5)  # five more periods, no new weights
        assert role.evaluations == (1 if once else 1 + 5)
        publisher.publish(_learner_message(config, version=2, learner_step=100))
        _step_until(role, lambda: role.evaluations >= (2 if once else 7))
        steps = [e.learner_step for e in role.history]
        assert steps == ([50, 100] if once else [50] * 6 + [100])
    finally:
        role.close()
