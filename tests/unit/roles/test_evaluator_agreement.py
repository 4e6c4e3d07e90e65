"""The evaluator's ``evaluate_quantized``: the agreement is measured against the same learner step's weights."""

from __future__ import annotations

import csv
import time

import pytest

from actorq.config import replace
from actorq.quantize.codec import encode_message
from actorq.replay import LEARNER_WEIGHTS_TABLE, POLICY_TABLE, ReverbWeightPublisher
from actorq.replay.client import new_client
from actorq.roles.evaluator import EvaluatorRole
from tests.conftest import tiny_config
from tests.messages import TEST_KEY
from tests.unit.roles.cartpole_weights import learner_message, torch_state

pytestmark = pytest.mark.reverb


def _evaluations(role: EvaluatorRole, n: int, timeout_s: float = 60) -> None:
    """Step the role until it has made ``n`` evaluations (one per ``evaluator.period_s``)."""
    deadline = time.monotonic() + timeout_s
    while role.evaluations < n:
        assert time.monotonic() < deadline, f"only {role.evaluations} of {n} evaluations in {timeout_s} s"
        role.step()


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_the_quantized_policy_is_compared_on_the_fp32_episodes_states_at_the_same_learner_step(
    reverb_server, tmp_path, precision
):
    config = tiny_config("dqn")
    config = replace(
        config,
        actor=replace(config.actor, precision=precision),
        evaluator=replace(config.evaluator, evaluate_quantized=True, episodes=2, period_s=0.05),
    )
    server = reverb_server(config)
    address = f"localhost:{server.port}"
    client = new_client(address)
    ReverbWeightPublisher(client, LEARNER_WEIGHTS_TABLE).publish(learner_message(config, seed=1))
    role = EvaluatorRole(config, tmp_path, address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        _evaluations(role, 1)
        # The broadcast policy acts the other way from now on; the second evaluation installs it, so the third
        # would agree on no state if the agreement were not measured against the same learner step's weights.
        swapped = torch_state(config, seed=1)  # the learner's weights with the two actions' Q-values swapped
        swapped["head.weight"], swapped["head.bias"] = (
            swapped["head.weight"][::-1].copy(),
            swapped["head.bias"][::-1].copy(),
        )
        other = encode_message(
            swapped, version=1, learner_step=0, precision=precision, comm_bits=8, key=TEST_KEY
        )
        ReverbWeightPublisher(client, POLICY_TABLE).publish(other)
        _evaluations(role, 3)
    finally:
        role.close()
    with open(tmp_path / "evaluator" / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    # Before any broadcast the broadcast policy's columns are there, empty (the first row fixes the header).
    assert rows[0]["quantized_return"] == "" and rows[0]["quantized_learner_step"] == ""
    assert rows[2]["quantized_learner_step"] == "0" and rows[2]["quantized_return"] != ""
    for row in rows:
        assert int(row["agreement_states"]) >= 2 * 8  # CartPole lasts >= 8 steps
        if precision == "fp32":
            assert float(row["quantized_agreement"]) == 1.0
        else:  # 8-bit codes of the same weights: an action differs only on a near tie
            assert float(row["quantized_agreement"]) >= 0.9
