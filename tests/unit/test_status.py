"""Status records: the typed contract between roles and the supervisor, restarts and resumes."""

from __future__ import annotations

import json

import pytest

from actorq.status import (
    RECORDS,
    STATUS_FILE,
    ActorStatus,
    Evaluation,
    EvaluatorStatus,
    StatusError,
    from_dict,
    read_status,
    to_dict,
    write_status,
)


def test_every_record_round_trips_through_json(tmp_path):
    for role, cls in RECORDS.items():
        record = cls(role=role, label=role, step=7)
        write_status(tmp_path, record)
        assert read_status(tmp_path) == record
    evaluations = (Evaluation(time=1.0, learner_step=3, actor_steps=40, eval_return=9.5),)
    record = EvaluatorStatus(role="evaluator", label="evaluator", evaluations=evaluations)
    assert from_dict(json.loads(json.dumps(to_dict(record)))) == record


def test_a_renamed_or_missing_field_is_an_error_not_a_silent_zero():
    data = to_dict(ActorStatus(role="actor", label="actor_0", step=12))
    data["steps"] = data.pop("step")  # a rename on the writing side
    with pytest.raises(StatusError, match="steps"):
        from_dict(data)
    with pytest.raises(StatusError, match="unknown role"):
        from_dict({"role": "critic", "label": "critic"})
    with pytest.raises(StatusError, match="JSON object"):
        from_dict([1, 2])
    bad_eval = to_dict(EvaluatorStatus(role="evaluator", label="evaluator"))
    bad_eval["evaluations"] = [{"time": 1.0, "return": 3.0}]
    with pytest.raises(StatusError, match="evaluation"):
        from_dict(bad_eval)


def test_unreadable_or_absent_records_read_as_none(tmp_path):
    assert read_status(tmp_path) is None
    (tmp_path / STATUS_FILE).write_text("{half a rec")
    assert read_status(tmp_path) is None


def test_records_are_replaced_whole(tmp_path):
    write_status(tmp_path, ActorStatus(role="actor", label="actor_0", step=1))
    write_status(tmp_path, ActorStatus(role="actor", label="actor_0", step=2))
    assert read_status(tmp_path).step == 2
    assert [p.name for p in tmp_path.iterdir()] == [STATUS_FILE]  # no temporary file left behind
