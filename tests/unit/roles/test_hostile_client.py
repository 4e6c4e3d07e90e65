"""A second Reverb client that holds no key, against roles restarted on the run's replay server.

Reverb serves its port without authentication, so anyone who reaches it can do what this client does: write any
record into a role's run-state table (``run_state_<label>``), empty one (``reset``), put anything into the weight
tables, and make the server checkpoint what it holds. Each test does one of those to a run whose roles are built
the way a restart builds them (the constructor, as Ray or the local launcher re-runs it), then asserts that the
role starts and keeps running, that an actor's weights floor never goes down, that the run's outcome (the versions
published, the evaluations the supervisor stops on) is not changed, and that the rejection is counted.

The forgeries use the record layout the run uses (``RUN_STATE_FORMAT``) with the run's public id, and, where the
layout carries a tag, 32 bytes the attacker had to guess.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from actorq.launchers.monitor import RunMonitor
from actorq.replay import (
    LEARNER_WEIGHTS_TABLE,
    POLICY_TABLE,
    ReverbWeightPublisher,
    ReverbWeightSubscriber,
    run_state_record,
)
from actorq.replay.client import new_client
from actorq.roles.actor import ActorRole
from actorq.roles.evaluator import EvaluatorRole
from actorq.roles.quantizer import QuantizerRole
from actorq.status import Evaluation
from tests.conftest import tiny_config
from tests.messages import TEST_KEY, split
from tests.unit.roles.cartpole_weights import learner_message
from tests.unit.roles.test_resume_on_another_host import _close_actor, _policy_message
from tests.waiting import wait_until

pytestmark = pytest.mark.reverb

RUN_ID = TEST_KEY.run_id_hex  # public: in clear in every signed message's preamble
HUGE = 2**63 - 1


def forge(address: str, label: str, values: dict[str, np.ndarray], run_id: str = RUN_ID) -> None:
    """Write a record into ``label``'s run-state table the way a client without the key can."""
    names = ",".join(values)
    columns = [
        np.array([run_state_record.RUN_STATE_FORMAT], np.int64),
        np.frombuffer(run_id.encode(), np.uint8),
        np.frombuffer(names.encode(), np.uint8),
        *(np.asarray(v) for v in values.values()),
    ]
    if run_state_record.RUN_STATE_FORMAT >= 2:  # the signed layout: a tag it cannot compute
        columns.append(np.frombuffer(os.urandom(32), np.uint8))
    client = new_client(address)
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    try:
        writer.append(columns)
        writer.create_item(f"run_state_{label}", 1.0, [c[-1] for c in writer.history])
        writer.flush(timeout_ms=5000)
    finally:
        writer.close()


def actor_record(steps=10, episodes=1, floor=5) -> dict[str, np.ndarray]:
    return {"steps": np.int64(steps), "episodes": np.int64(episodes), "weights_floor": np.int64(floor)}


def insert(address: str, table: str, *columns) -> None:
    """Put one item of ``columns`` into a weight table (replacing the message there)."""
    new_client(address).insert(list(columns), priorities={table: 1.0})


@pytest.fixture
def replay(reverb_server):
    config = tiny_config("dqn")
    server = reverb_server(config)
    address = f"localhost:{server.port}"
    return config, address, ReverbWeightPublisher(new_client(address), POLICY_TABLE)


def _actor(config, run_dir: Path, address: str, actor_id: int = 0) -> ActorRole:
    return ActorRole(config, run_dir, address, actor_id=actor_id, connect_timeout_s=10, weights_key=TEST_KEY)


def _ran_on_v5(config, run_dir: Path, address: str, policy) -> tuple[int, int]:
    """A genuine actor that installed v5 and acted 30 steps (its record stored); its (steps, episodes)."""
    policy.publish(_policy_message(config, 5))
    first = _actor(config, run_dir, address)
    try:
        assert first.actor.wait_for_weights(timeout_s=10) and first.actor.weights.version == 5
        for _ in range(30):
            first.step()
        first.report()
        return first.steps, first.episodes
    finally:
        _close_actor(first)


def _restarted_actor_holds_v5(config, run_dir, address, policy, attack) -> ActorRole:
    """Run an actor to v5, let ``attack`` act on replay, restart the actor on the same host, and check it: it
    starts, never installs the planted v3, installs v6, and counts at least one rejection."""
    steps, _ = _ran_on_v5(config, run_dir, address, policy)
    attack()
    policy.publish(_policy_message(config, 3))  # an old signed message the attacker kept, planted back
    role = _actor(config, run_dir, address)
    try:
        assert role.actor.weights.floor >= 5, f"floor went down to {role.actor.weights.floor}"
        assert 0 <= role.steps < 2**62, role.steps
        assert not role.actor.wait_for_weights(timeout_s=1.5), "installed the planted v3"
        policy.publish(_policy_message(config, 6))
        assert role.actor.wait_for_weights(timeout_s=10), f"refused v6: {role.actor.weights.last_error}"
        for _ in range(5):
            role.step()  # keeps running
        assert role.actor.weights.version == 6
        assert role.status_record().rejected_messages >= 1
        assert role.resume_values()["weights_floor"] == 6
        return role
    finally:
        _close_actor(role)


@pytest.mark.parametrize(
    "attack",
    [
        "floor_up",
        "floor_down",
        "reset_table",
        "other_run_id",
        "huge_counters",
        "wrong_shapes",
        "wrong_dtype",
        "junk_columns",
    ],
)
def test_a_forged_actor_record_neither_stops_nor_rolls_back_a_restarted_actor(replay, tmp_path, attack):
    config, address, policy = replay
    forgeries = {
        "floor_up": lambda: forge(address, "actor_0", actor_record(floor=HUGE)),
        "floor_down": lambda: forge(address, "actor_0", actor_record(floor=-1)),
        "reset_table": lambda: new_client(address).reset("run_state_actor_0"),
        "other_run_id": lambda: forge(address, "actor_0", actor_record(floor=-1), run_id="0011223344556677"),
        "huge_counters": lambda: forge(address, "actor_0", actor_record(steps=2**62 + 1, episodes=HUGE)),
        "wrong_shapes": lambda: forge(
            address,
            "actor_0",
            {"steps": np.zeros(3, np.int64), "episodes": np.int64(1), "weights_floor": np.int64(-1)},
        ),
        "wrong_dtype": lambda: forge(
            address,
            "actor_0",
            {"steps": np.float64(1e300), "episodes": np.int64(1), "weights_floor": np.int64(-1)},
        ),
        "junk_columns": lambda: insert(address, "run_state_actor_0", np.array([b"junk"])),
    }
    _restarted_actor_holds_v5(config, tmp_path, address, policy, forgeries[attack])


def test_a_forged_floor_up_record_on_a_new_host_starts_from_the_newest_verified_message(replay, tmp_path):
    """Without its local record (restarted on another host), a forged floor is refused and the actor starts from
    the newest message it can verify."""
    config, address, policy = replay
    _ran_on_v5(config, tmp_path / "a", address, policy)
    forge(address, "actor_0", actor_record(floor=HUGE))
    role = _actor(config, tmp_path / "b", address)
    try:
        assert role.actor.wait_for_weights(timeout_s=10), role.actor.weights.last_error
        assert role.actor.weights.version == 5 and role.status_record().rejected_messages >= 1
        role.step()
    finally:
        _close_actor(role)


def _quantizer(config, run_dir, address) -> QuantizerRole:
    return QuantizerRole(config, run_dir, address, connect_timeout_s=10, weights_key=TEST_KEY)


def _published(address: str) -> dict | None:
    """The header of the policy message in the table (None: empty)."""
    message = ReverbWeightSubscriber(new_client(address), POLICY_TABLE).latest()
    return None if message is None else split(message)[0]


def _quantized_twice(config, run_dir, address, learner) -> int:
    """A genuine quantizer that quantized learner v4 and v7; the policy version it published last."""
    first = _quantizer(config, run_dir, address)
    try:
        for version in (4, 7):
            learner.publish(learner_message(config, seed=version, version=version, learner_step=10 * version))
            first.step()
        return first.version
    finally:
        first.close()


@pytest.mark.parametrize(
    "attack", ["version_huge", "learner_version_rollback", "reset_tables", "other_run_id", "wrong_shapes"]
)
def test_a_forged_quantizer_record_changes_no_version_it_publishes(replay, tmp_path, attack):
    config, address, _ = replay
    learner = ReverbWeightPublisher(new_client(address), LEARNER_WEIGHTS_TABLE)
    last = _quantized_twice(config, tmp_path, address, learner)
    record = {
        "version_huge": {"version": np.int64(2**63 - 2), "learner_version": np.int64(7)},
        "learner_version_rollback": {"version": np.int64(last), "learner_version": np.int64(-1)},
        "other_run_id": {"version": np.int64(0), "learner_version": np.int64(-1)},
        "wrong_shapes": {"version": np.zeros(2, np.int64), "learner_version": np.int64(-1)},
    }
    if attack == "reset_tables":
        for table in ("run_state_quantizer", POLICY_TABLE):
            new_client(address).reset(table)
    else:
        forge(
            address,
            "quantizer",
            record[attack],
            run_id="0011223344556677" if attack == "other_run_id" else RUN_ID,
        )
    # The attacker plants the old learner message v4 (signed by the learner, kept from the table).
    learner.publish(learner_message(config, seed=4, version=4, learner_step=40))
    role = _quantizer(config, tmp_path, address)
    try:
        role.step()
        published = _published(address)
        assert published is None or published["learner_step"] == 70, f"re-published old weights {published}"
        assert role.version < 2**62
        learner.publish(learner_message(config, seed=9, version=9, learner_step=90))
        role.step()  # publishes above every version published so far, without raising
        after = _published(address)
        assert after["learner_step"] == 90 and last < after["version"] < 2**62, after
        if attack != "reset_tables":
            assert role.rejected >= 1
    finally:
        role.close()


def _evaluations(values) -> dict[str, np.ndarray]:
    n = len(values)
    return {
        "time": np.linspace(1.0, 2.0, n),
        "learner_step": np.arange(1, n + 1, dtype=np.int64) * 100,
        "actor_steps": np.arange(1, n + 1, dtype=np.int64) * 1000,
        "eval_return": np.asarray(values, np.float64),
    }


@pytest.mark.parametrize(
    "attack",
    [
        "returns_huge",
        "returns_nan",
        "history_too_long",
        "ragged",
        "other_run_id",
        "wrong_shapes",
        "reset_table",
    ],
)
def test_a_forged_evaluator_record_cannot_end_the_run_as_target(replay, tmp_path, attack):
    config, address, _ = replay
    genuine = [
        Evaluation(time=1.5, learner_step=10, actor_steps=100, eval_return=9.5),
        Evaluation(time=2.5, learner_step=20, actor_steps=250, eval_return=30.0),
    ]
    first = EvaluatorRole(config, tmp_path, address, connect_timeout_s=10, weights_key=TEST_KEY)
    first.history = list(genuine)
    first.publish_status()
    first.close()
    records = {
        "returns_huge": _evaluations([1e9] * 5),
        "returns_nan": _evaluations([float("nan"), float("inf"), 1e9, 1e9, 1e9]),
        "history_too_long": _evaluations([200.0] * 200_000),
        "ragged": {**_evaluations([1e9] * 5), "time": np.ones(2)},
        "other_run_id": _evaluations([1e9] * 5),
        "wrong_shapes": {**_evaluations([1e9] * 5), "eval_return": np.full((5, 1), 1e9)},
    }
    if attack == "reset_table":
        new_client(address).reset("run_state_evaluator")
    else:
        forge(
            address,
            "evaluator",
            records[attack],
            run_id="0011223344556677" if attack == "other_run_id" else RUN_ID,
        )
    role = EvaluatorRole(config, tmp_path, address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        assert role.history == genuine, role.history[:5]
        status = role.status_record()
        monitor = RunMonitor(
            tiny_config("dqn", target_return=195.0), tmp_path, lambda label: status, ["evaluator"]
        )
        assert monitor.target_evaluation() is None
        if attack != "reset_table":
            assert status.rejected_messages >= 1
    finally:
        role.close()


JUNK = {
    "string_0d": (np.array(b"junk"),),
    "strings": (np.array([b"a", b"bc"]),),
    "uint8_0d": (np.uint8(7),),
    "uint8_2d": (np.zeros((4, 4), np.uint8),),
    "uint8_empty": (np.zeros(0, np.uint8),),
    "float32": (np.zeros(10, np.float32),),
    "float64_2d": (np.ones((3, 2)),),
    "int64": (np.arange(10, dtype=np.int64),),
    "int8": (np.arange(10, dtype=np.int8),),
    "uint16": (np.zeros(3, np.uint16),),
    "bool": (np.array([True, False]),),
    "two_columns": (np.zeros(3, np.uint8), np.zeros(3, np.uint8)),
    "oversized": (np.zeros(48 << 20, np.uint8),),
}


def test_junk_in_the_policy_table_is_a_counted_rejection_for_a_synchronous_actor(replay, tmp_path):
    config, address, policy = replay
    role = _actor(config, tmp_path, address)
    try:
        for name, columns in JUNK.items():
            before = role.actor.weights.rejected
            insert(address, POLICY_TABLE, *columns)
            assert not role.actor.wait_for_weights(timeout_s=0.5), name  # the start-up pull: never raises
            assert role.actor.weights.rejected > before, name
            expected = "TruncatedMessageError" if name == "uint8_empty" else "MalformedMessageError"
            assert role.actor.weights.last_error.startswith(expected), (name, role.actor.weights.last_error)
        policy.publish(_policy_message(config, 2))
        assert role.actor.wait_for_weights(timeout_s=10) and role.actor.weights.version == 2
        for name, columns in JUNK.items():
            before = role.actor.weights.rejected
            insert(address, POLICY_TABLE, *columns)
            role.actor.update(wait=True)  # a periodic pull
            assert role.actor.weights.rejected > before, name
        role.step()
        assert role.actor.weights.version == 2
    finally:
        _close_actor(role)


def test_junk_in_the_policy_table_never_stops_the_async_updater(replay, tmp_path):
    from actorq.config import replace

    config, address, policy = replay
    config = replace(config, actor=replace(config.actor, async_update=True, update_period=1))
    policy.publish(_policy_message(config, 2))
    role = _actor(config, tmp_path, address)
    try:
        assert role.actor.wait_for_weights(timeout_s=10)
        for name, columns in JUNK.items():
            before = role.actor.weights.rejected
            insert(address, POLICY_TABLE, *columns)
            wait_until(
                lambda before=before: (role.step(), role.actor.weights.rejected > before)[1],
                20,
                f"the updater to count the {name} item",
                poll_s=0.02,
            )
            assert role.actor._updater.is_alive(), f"{name}: the updater thread died"
        policy.publish(_policy_message(config, 3))
        wait_until(
            lambda: (role.step(), role.actor.weights.version == 3)[1],
            20,
            "the updater to install v3",
            poll_s=0.02,
        )
        assert role.actor.weights.version == 3, "the updater no longer installs new weights"
    finally:
        _close_actor(role)


def test_junk_in_the_weight_tables_never_stops_the_quantizer(replay, tmp_path):
    config, address, _ = replay
    learner = ReverbWeightPublisher(new_client(address), LEARNER_WEIGHTS_TABLE)
    for name, columns in JUNK.items():
        insert(address, POLICY_TABLE, *columns)  # read at start, to continue above what is published
        role = _quantizer(config, tmp_path / name, address)
        try:
            insert(address, LEARNER_WEIGHTS_TABLE, *columns)
            before = role.rejected
            role.step()
            assert role.rejected > before, name
        finally:
            role.close()
    role = _quantizer(config, tmp_path / "last", address)
    try:
        learner.publish(learner_message(config, seed=1, version=3, learner_step=30))
        role.step()
        assert role.published == 1
    finally:
        role.close()


def test_junk_in_the_weight_tables_never_stops_the_evaluator(replay, tmp_path):
    from actorq.config import replace

    config, address, policy = replay
    config = replace(config, evaluator=replace(config.evaluator, period_s=0.01, evaluate_quantized=True))
    role = EvaluatorRole(config, tmp_path, address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        for name, columns in JUNK.items():
            before = role.rejected
            insert(address, LEARNER_WEIGHTS_TABLE, *columns)
            role._first = True
            role.step()
            assert role.rejected > before, f"learner table: {name}"
        learner = ReverbWeightPublisher(new_client(address), LEARNER_WEIGHTS_TABLE)
        learner.publish(learner_message(config, seed=1, version=3, learner_step=30))
        for name, columns in JUNK.items():
            before = role.rejected
            insert(address, POLICY_TABLE, *columns)
            role._first = True
            role._learner_sub.refetch()
            role.step()
            assert role.rejected > before, f"policy table: {name}"
        assert role.evaluations == len(JUNK)
    finally:
        role.close()


def test_records_forged_then_checkpointed_are_refused_after_a_resume(reverb_server, tmp_path):
    """``checkpoint()`` is open to any client: forged records survive into ``--resume``, and are refused there."""
    config = tiny_config("dqn")
    server = reverb_server(config, checkpoint_dir=tmp_path / "checkpoints")
    address = f"localhost:{server.port}"
    policy = ReverbWeightPublisher(new_client(address), POLICY_TABLE)
    _ran_on_v5(config, tmp_path / "run", address, policy)
    forge(address, "actor_0", actor_record(floor=HUGE))
    forge(
        address,
        "actor_1",
        {"steps": np.zeros(2, np.int64), "episodes": np.int64(1), "weights_floor": np.int64(1)},
    )
    forge(address, "quantizer", {"version": np.int64(2**63 - 2), "learner_version": np.int64(-1)})
    forge(address, "evaluator", _evaluations([1e9] * 5))
    new_client(address).checkpoint()  # the attacker's call
    server.stop()

    restored = reverb_server(config, checkpoint_dir=tmp_path / "checkpoints")
    address = f"localhost:{restored.port}"
    run_dir = tmp_path / "run"
    actors = [_actor(config, run_dir, address, i) for i in (0, 1)]
    try:
        assert actors[0].actor.weights.floor == 5
        for role in actors:
            assert role.actor.wait_for_weights(timeout_s=10) and role.actor.weights.version == 5
            role.step()
            assert role.status_record().rejected_messages >= 1
    finally:
        for role in actors:
            _close_actor(role)
    quantizer = _quantizer(config, run_dir, address)
    evaluator = EvaluatorRole(config, run_dir, address, connect_timeout_s=10, weights_key=TEST_KEY)
    try:
        assert quantizer.version < 2**62 and quantizer.rejected >= 1
        assert evaluator.history == [] and evaluator.rejected >= 1
    finally:
        quantizer.close()
        evaluator.close()
