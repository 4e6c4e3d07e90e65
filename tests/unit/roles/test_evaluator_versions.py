"""``evaluator.each_version_once``: each learner weight version is evaluated at most once, whatever the period."""

from __future__ import annotations

import time

import pytest

from actorq.config import replace
from actorq.replay import LEARNER_WEIGHTS_TABLE, ReverbWeightPublisher
from actorq.replay.client import new_client
from actorq.roles.evaluator import EvaluatorRole
from tests.conftest import tiny_config
from tests.messages import TEST_KEY
from tests.unit.roles.cartpole_weights import learner_message

pytestmark = pytest.mark.reverb


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
    publisher.publish(learner_message(config, seed=1, version=1, learner_step=50))
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
        publisher.publish(learner_message(config, seed=2, version=2, learner_step=100))
        _step_until(role, lambda: role.evaluations >= (2 if once else 7))
        steps = [e.learner_step for e in role.history]
        assert steps == ([50, 100] if once else [50] * 6 + [100])
    finally:
        role.close()
