"""Resume records on the replay server: one table per role label, plain numpy columns signed with the run's key,
every value bounded; a record that does not verify, is another run's or role's, another layout, or out of range
is rejected (counted, never raised); kept by Reverb's checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.config import replace
from actorq.quantize.signing import generate_key
from actorq.replay.client import new_client
from actorq.replay.run_state import RunStateError, RunStateStore, run_state_labels, run_state_table
from actorq.replay.run_state_record import (
    RUN_STATE_FORMAT,
    Field,
    RejectedRecordError,
    check_fields,
    decode,
    encode,
)
from tests.conftest import tiny_config
from tests.messages import TEST_KEY

SCHEMA = {
    "steps": Field(np.int64, 0, 0, 1 << 62),
    "returns": Field(np.float64, 1, -1e8, 1e8, max_len=10),
}
VALUES = {"steps": np.int64(1234), "returns": np.array([1.5, 2.5])}


def _check(fields) -> None:
    assert int(fields["steps"]) == 1234 and fields["returns"].tolist() == [1.5, 2.5]


def test_a_record_is_plain_signed_columns_and_decodes_to_its_fields():
    columns = encode("actor_0", TEST_KEY, VALUES)
    assert all(c.dtype != object for c in columns) and int(columns[0][0]) == RUN_STATE_FORMAT
    assert columns[-1].dtype == np.uint8 and columns[-1].shape == (32,)
    _check(decode(columns, "actor_0", TEST_KEY, SCHEMA))
    unsigned = encode("actor_0", None, VALUES)  # --insecure-weights: bounded only
    assert unsigned[-1].shape == (0,)
    _check(decode(unsigned, "actor_0", None, SCHEMA))


def _edit(columns, index, value):
    out = list(columns)
    out[index] = value
    return out


@pytest.mark.parametrize(
    ("columns", "says"),
    [
        (lambda c: _edit(c, 3, np.int64(10**6)), "signature does not match"),  # a value changed, old tag
        (lambda c: _edit(c, -1, np.zeros(32, np.uint8)), "signature does not match"),
        (lambda c: _edit(c, -1, np.zeros(0, np.uint8)), "no run-state signature"),
        (
            lambda c: encode("actor_1", TEST_KEY, VALUES),
            "signature does not match this run's key for actor_0",
        ),
        (lambda c: encode("actor_0", generate_key(), VALUES), "another run's record"),
        (lambda c: encode("actor_0", None, VALUES), "names run unsigned"),
        (lambda c: _edit(c, 0, np.array([1], np.int64)), "not a run-state record of format 2"),
        (lambda c: _edit(c, 0, np.array([2], np.int32)), "not a run-state record"),
        (lambda c: [], "0 columns"),
        (lambda c: c[:4], "4 columns"),
        (lambda c: _edit(c, 3, np.array([b"x"])), "not numeric"),
    ],
)
def test_a_record_that_does_not_verify_is_rejected_naming_why(columns, says):
    with pytest.raises(RejectedRecordError, match=says):
        decode(columns(encode("actor_0", TEST_KEY, VALUES)), "actor_0", TEST_KEY, SCHEMA)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"steps": np.int64(1 << 62), "returns": VALUES["returns"]}, "field steps holds"),
        ({"steps": np.int64(-5), "returns": VALUES["returns"]}, "field steps holds -5"),
        ({"steps": np.int64(1), "returns": np.array([np.nan])}, "field returns holds nan"),
        ({"steps": np.int64(1), "returns": np.array([1e9])}, "field returns holds"),
        ({"steps": np.int64(1), "returns": np.ones(11)}, "11 entries, at most 10"),
        ({"steps": np.int32(1), "returns": VALUES["returns"]}, r"field steps is int32\[0-d\]"),
        ({"steps": np.int64(1), "returns": np.ones((2, 1))}, r"field returns is float64\[2-d\]"),
        ({"episodes": np.int64(1), "returns": VALUES["returns"]}, r"fields \['episodes', 'returns'\]"),
    ],
)
def test_a_signed_record_out_of_bounds_or_of_another_layout_is_rejected(values, says):
    """Even signed with the run's key (another version, a buggy writer), values must keep their bounds."""
    with pytest.raises(RejectedRecordError, match=says):
        decode(encode("actor_0", TEST_KEY, values), "actor_0", TEST_KEY, SCHEMA)


def test_fields_are_checked_by_the_same_rule_wherever_they_come_from():
    _check(check_fields(VALUES, SCHEMA))
    with pytest.raises(RejectedRecordError, match="field steps is missing"):
        check_fields({"returns": VALUES["returns"]}, SCHEMA)


def test_every_resuming_role_has_a_table():
    config = tiny_config("dqn", **{"actor.num_actors": 3})
    assert run_state_labels(config) == ["quantizer", "actor_0", "actor_1", "actor_2", "evaluator"]
    assert run_state_table("actor_2") == "run_state_actor_2"


@pytest.mark.reverb
def test_the_store_reads_nothing_then_the_newest_record(reverb_server):
    server = reverb_server(tiny_config("dqn"))
    store = RunStateStore(new_client(f"localhost:{server.port}"), "actor_1", TEST_KEY)
    assert store.read(SCHEMA) is None  # a new run: nothing stored, and the read does not block
    assert store.write({"steps": np.int64(1), "returns": np.array([0.5])})
    assert store.write(VALUES)
    _check(store.resume(SCHEMA, budget_s=5))
    # Another label's record is its own; another run's key, or none, rejects this run's record (counted).
    assert RunStateStore(store._client, "actor_0", TEST_KEY).read(SCHEMA) is None
    other = RunStateStore(store._client, "actor_1", generate_key())
    assert other.read(SCHEMA) is None and other.rejected == 1
    assert store.rejected == 0


@pytest.mark.reverb
def test_a_label_replay_has_no_table_for_is_an_error(reverb_server):
    server = reverb_server(tiny_config("dqn"))  # 2 actors
    with pytest.raises(RunStateError, match="no table run_state_actor_2 for actor_2"):
        RunStateStore(new_client(f"localhost:{server.port}"), "actor_2", TEST_KEY).read(SCHEMA)


@pytest.mark.reverb
def test_records_survive_the_replay_checkpoint_even_resumed_with_fewer_actors(reverb_server, tmp_path):
    config = tiny_config("dqn", **{"actor.num_actors": 3})
    server = reverb_server(config, checkpoint_dir=tmp_path)
    client = new_client(f"localhost:{server.port}")
    for label in run_state_labels(config):
        assert RunStateStore(client, label, TEST_KEY).write(VALUES)
    client.checkpoint()
    server.stop()
    # --resume with actor.num_actors=1: Reverb refuses a checkpoint with tables it was not given, unless served.
    fewer = reverb_server(replace(config, **{"actor.num_actors": 1}), checkpoint_dir=tmp_path)
    client = new_client(f"localhost:{fewer.port}")
    for label in ("actor_0", "actor_2", "quantizer", "evaluator"):
        _check(RunStateStore(client, label, TEST_KEY).read(SCHEMA))
