"""Resume records on the replay server: one table per role label, plain numpy columns, another run's ignored, a
record of another kind refused with the field it got wrong, kept by Reverb's checkpoints."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from actorq.config import replace
from actorq.replay.client import new_client
from actorq.replay.run_state import (
    RunStateError,
    RunStateStore,
    decode,
    encode,
    run_state_labels,
    run_state_table,
)
from tests.conftest import tiny_config

SCHEMA = {"steps": (np.int64, 0), "returns": (np.float64, 1)}
VALUES = {"steps": np.int64(1234), "returns": np.array([1.5, 2.5])}


def _check(fields) -> None:
    assert int(fields["steps"]) == 1234 and fields["returns"].tolist() == [1.5, 2.5]


def test_a_record_is_plain_columns_and_decodes_to_its_fields():
    columns = encode("abcd", VALUES)
    assert all(c.dtype != object for c in columns)
    _check(decode(columns, "abcd", SCHEMA, "here"))


def test_another_runs_record_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert decode(encode("other", VALUES), "abcd", SCHEMA, "table t") is None
    assert "another run (run id other, this run abcd)" in caplog.text


@pytest.mark.parametrize(
    ("columns", "says"),
    [
        (lambda c: [np.array([2], np.int64), *c[1:]], "not a run-state record of format 1"),
        (lambda c: [np.array([1], np.int32), *c[1:]], "not a run-state record"),
        (lambda c: [], "not a run-state record"),
        (lambda c: [*c[:3], np.int32(1234), c[4]], r"field steps is int32\[0-d\], expected int64\[0-d\]"),
        (
            lambda c: [*c[:4], np.array([[1.5, 2.5]])],
            r"field returns is float64\[2-d\], expected float64\[1-d\]",
        ),
        (lambda c: c[:4], r"fields \['steps', 'returns'\]"),
        (
            lambda c: encode("abcd", {"episodes": np.int64(1), "returns": c[4]}),
            r"fields \['episodes', 'returns'\]",
        ),
    ],
)
def test_a_record_of_another_kind_is_an_error_naming_what_differs(columns, says):
    with pytest.raises(RunStateError, match=says) as caught:
        decode(columns(encode("abcd", VALUES)), "abcd", SCHEMA, "table t")
    assert "table t" in str(caught.value) and "another ActorQ version" in str(caught.value)


def test_every_resuming_role_has_a_table():
    config = tiny_config("dqn", **{"actor.num_actors": 3})
    assert run_state_labels(config) == ["quantizer", "actor_0", "actor_1", "actor_2", "evaluator"]
    assert run_state_table("actor_2") == "run_state_actor_2"


@pytest.mark.reverb
def test_the_store_reads_nothing_then_the_newest_record(reverb_server):
    server = reverb_server(tiny_config("dqn"))
    store = RunStateStore(new_client(f"localhost:{server.port}"), "actor_1", "abcd")
    assert store.read(SCHEMA) is None  # a new run: nothing stored, and the read does not block
    assert store.write({"steps": np.int64(1), "returns": np.array([0.5])})
    assert store.write(VALUES)
    _check(store.resume(SCHEMA, budget_s=5))
    # Another label's record is its own; an unsigned run's id is "unsigned".
    assert RunStateStore(store._client, "actor_0", "abcd").read(SCHEMA) is None
    assert RunStateStore(store._client, "actor_1", "").read(SCHEMA) is None


@pytest.mark.reverb
def test_a_label_replay_has_no_table_for_is_an_error(reverb_server):
    server = reverb_server(tiny_config("dqn"))  # 2 actors
    with pytest.raises(RunStateError, match="no table run_state_actor_2 for actor_2"):
        RunStateStore(new_client(f"localhost:{server.port}"), "actor_2", "abcd").read(SCHEMA)


@pytest.mark.reverb
def test_records_survive_the_replay_checkpoint_even_resumed_with_fewer_actors(reverb_server, tmp_path):
    config = tiny_config("dqn", **{"actor.num_actors": 3})
    server = reverb_server(config, checkpoint_dir=tmp_path)
    client = new_client(f"localhost:{server.port}")
    for label in run_state_labels(config):
        assert RunStateStore(client, label, "abcd").write(VALUES)
    client.checkpoint()
    server.stop()
    # --resume with actor.num_actors=1: Reverb refuses a checkpoint with tables it was not given, unless served.
    fewer = reverb_server(replace(config, **{"actor.num_actors": 1}), checkpoint_dir=tmp_path)
    client = new_client(f"localhost:{fewer.port}")
    for label in ("actor_0", "actor_2", "quantizer", "evaluator"):
        _check(RunStateStore(client, label, "abcd").read(SCHEMA))
