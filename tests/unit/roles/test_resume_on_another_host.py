"""A role restarted on another host (an empty run directory of its own, the same replay server) continues where it
was: the actor its steps, episodes and weights-version floor, the quantizer its versions, the evaluator its
history. Each role is built the way a restart builds it (Ray re-runs the constructor with the same arguments);
nothing is carried over but the replay address."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from actorq.networks.mapping import mapping_table, torch_state_shapes
from actorq.quantize.codec import encode_message
from actorq.quantize.signing import LEARNER_STREAM
from actorq.replay import LEARNER_WEIGHTS_TABLE, POLICY_TABLE, ReverbWeightPublisher
from actorq.replay.client import new_client
from actorq.replay.run_state import RunStateStore
from actorq.roles.actor import ActorRole
from actorq.roles.evaluator import EvaluatorRole
from actorq.roles.quantizer import QuantizerRole
from actorq.status import STATUS_FILE, Evaluation
from tests.conftest import tiny_config
from tests.messages import TEST_KEY

pytestmark = pytest.mark.reverb

OBS, OUT = 4, 2  # CartPole


def _policy_message(config, version: int) -> np.ndarray:
    rng = np.random.default_rng(version)
    shapes = torch_state_shapes("dqn", OBS, OUT, tuple(config.network.policy_layers))
    state = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return encode_message(
        state, version=version, learner_step=10 * version, precision="int8", comm_bits=8, key=TEST_KEY
    )


def _learner_message(config, version: int) -> np.ndarray:
    layers = tuple(config.network.policy_layers)
    shapes = torch_state_shapes("dqn", OBS, OUT, layers)
    rng = np.random.default_rng(version)
    state = {
        tf_name: rng.standard_normal(shapes[key][::-1] if transpose else shapes[key]).astype(np.float32)
        for tf_name, key, transpose in mapping_table("dqn", layers)
    }
    return encode_message(
        state,
        version=version,
        learner_step=10 * version,
        precision="fp32",
        comm_bits=32,
        key=TEST_KEY,
        stream=LEARNER_STREAM,
    )


def _close_actor(role: ActorRole) -> None:
    role._watchdog.close()
    role.actor.close()
    for env in role.envs:
        env.close()
    role.close()


@pytest.fixture
def replay(reverb_server):
    """(config, replay address, policy publisher) of a fresh in-process replay server."""
    config = tiny_config("dqn")
    server = reverb_server(config)
    address = f"localhost:{server.port}"
    return config, address, ReverbWeightPublisher(new_client(address), POLICY_TABLE)


def _host(tmp_path: Path, name: str) -> Path:
    """A host's own, empty run directory (what a node Ray restarts a role on has of the run)."""
    path = tmp_path / name / "run"
    path.mkdir(parents=True)
    return path


def test_an_actor_restarted_on_another_host_keeps_its_steps_and_version_floor(replay, tmp_path):
    config, address, policy = replay
    policy.publish(_policy_message(config, 5))
    first = ActorRole(
        config, _host(tmp_path, "a"), address, actor_id=1, connect_timeout_s=10, weights_key=TEST_KEY
    )
    assert first.steps == 0 and first.actor.weights.floor == -1  # a new run: nothing on replay yet
    assert first.actor.wait_for_weights(timeout_s=10) and first.actor.weights.version == 5
    for _ in range(60):
        first.step()
    first.report()  # what the role does every log period and at stop
    steps, episodes = first.steps, first.episodes
    assert steps == 60
    _close_actor(first)

    # Ray restarts it on another node: same constructor arguments, an empty run directory there.
    b = _host(tmp_path, "b")
    second = ActorRole(config, b, address, actor_id=1, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        assert not (b / "actor_1" / STATUS_FILE).exists()  # nothing of the first process on this host
        assert (second.steps, second.episodes) == (steps, episodes)
        assert second.actor.weights.floor == 5
        # An older authentic message put back into the policy table is refused: the rollback guard holds.
        policy.publish(_policy_message(config, 3))
        assert not second.actor.wait_for_weights(timeout_s=1)
        assert second.actor.weights.version == -1 and "stale message v3" in second.actor.weights.last_error
        policy.publish(_policy_message(config, 6))
        assert second.actor.wait_for_weights(timeout_s=10) and second.actor.weights.version == 6
        second.step()
        second.report()
    finally:
        _close_actor(second)

    # The floor rose to 6 at the install, and the count went on from where it was: a third host sees both.
    third = ActorRole(
        config, _host(tmp_path, "c"), address, actor_id=1, connect_timeout_s=10, weights_key=TEST_KEY
    )
    try:
        assert third.steps == steps + 1 and third.actor.weights.floor == 6
    finally:
        _close_actor(third)
    # Another actor's record is its own; another run's key does not read this run's record.
    other = ActorRole(
        config, _host(tmp_path, "d"), address, actor_id=0, connect_timeout_s=10, weights_key=TEST_KEY
    )
    try:
        assert other.steps == 0 and other.actor.weights.floor == -1
    finally:
        _close_actor(other)


def test_a_quantizer_restarted_on_another_host_continues_its_versions(replay, tmp_path):
    config, address, _ = replay
    learner = ReverbWeightPublisher(new_client(address), LEARNER_WEIGHTS_TABLE)
    first = QuantizerRole(config, _host(tmp_path, "a"), address, connect_timeout_s=10, weights_key=TEST_KEY)
    for version in (4, 7):
        learner.publish(_learner_message(config, version))
        first.step()
    assert (first.version, first.published) == (8, 2)  # the learner message's version + 1
    first.close()
    # The policy table is emptied (a replay restored from an older checkpoint): only the record knows v8.
    new_client(address).reset(POLICY_TABLE)
    second = QuantizerRole(config, _host(tmp_path, "b"), address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        assert second.version == 8
        learner.publish(_learner_message(config, 4))  # older than the last one quantized: refused
        second.step()
        assert second.published == 0
        learner.publish(_learner_message(config, 8))
        second.step()
        assert (second.published, second.version) == (1, 9)
    finally:
        second.close()


def test_an_evaluator_restarted_on_another_host_keeps_its_history(replay, tmp_path):
    config, address, _ = replay
    first = EvaluatorRole(config, _host(tmp_path, "a"), address, connect_timeout_s=10, weights_key=TEST_KEY)
    first.history = [
        Evaluation(time=1.5, learner_step=10, actor_steps=100, eval_return=9.5),
        Evaluation(time=2.5, learner_step=20, actor_steps=250, eval_return=30.0),
    ]
    first.publish_status()  # what it does after every evaluation
    first.close()
    second = EvaluatorRole(config, _host(tmp_path, "b"), address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        assert second.history == first.history
    finally:
        second.close()


def test_a_record_of_another_kind_is_rejected_and_the_role_starts_afresh(replay, tmp_path):
    config, address, _ = replay
    # What another version might have stored for actor_0 (signed with this run's key): its steps as a float.
    RunStateStore(new_client(address), "actor_0", TEST_KEY).write(
        {"steps": np.float64(10), "episodes": np.int64(1), "weights_floor": np.int64(3)}
    )
    role = ActorRole(
        config, _host(tmp_path, "a"), address, actor_id=0, connect_timeout_s=10, weights_key=TEST_KEY
    )
    try:
        assert (role.steps, role.actor.weights.floor, role.actor.weights.rejected) == (0, -1, 1)
    finally:
        _close_actor(role)


def test_an_actor_of_a_resumed_run_continues_from_the_replay_checkpoint(reverb_server, tmp_path):
    """``--resume``: a new replay server restored from the Reverb checkpoint holds the records as checkpointed."""
    config = tiny_config("dqn")
    server = reverb_server(config, checkpoint_dir=tmp_path / "checkpoints")
    address = f"localhost:{server.port}"
    ReverbWeightPublisher(new_client(address), POLICY_TABLE).publish(_policy_message(config, 4))
    first = ActorRole(
        config, _host(tmp_path, "a"), address, actor_id=0, connect_timeout_s=10, weights_key=TEST_KEY
    )
    assert first.actor.wait_for_weights(timeout_s=10)
    for _ in range(25):
        first.step()
    first.report()
    _close_actor(first)
    new_client(address).checkpoint()  # what replay does at stop
    server.stop()

    restored = reverb_server(config, checkpoint_dir=tmp_path / "checkpoints")
    address = f"localhost:{restored.port}"
    resumed = ActorRole(
        config, _host(tmp_path, "b"), address, actor_id=0, connect_timeout_s=10, weights_key=TEST_KEY
    )
    try:
        assert resumed.steps == 25 and resumed.actor.weights.floor == 4
    finally:
        _close_actor(resumed)
