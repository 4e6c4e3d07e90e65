"""Status records: the typed contract between roles and the supervisor, restarts and resumes."""

from __future__ import annotations

import json
import re

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
    # Across Ray the dict travels as it is, without a JSON round trip: it must parse the same.
    assert from_dict(to_dict(record)) == record


def _written(tmp_path, record, edit) -> str:
    """Write ``record`` as a role would, apply ``edit`` to its JSON on disk, and return the file's path."""
    write_status(tmp_path, record)
    path = tmp_path / STATUS_FILE
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("role", sorted(RECORDS))
def test_every_missing_field_is_an_error_naming_file_and_field_not_a_silent_default(tmp_path, role):
    record = RECORDS[role](role=role, label=role, step=7)
    for name in to_dict(record):
        if name == "role":
            continue  # without its role a record has no type: the unknown-role error below
        path = _written(tmp_path, record, lambda d, n=name: d.pop(n))
        with pytest.raises(
            StatusError, match=rf"{re.escape(path)}: .*missing field\(s\) {name};.*delete that role's status"
        ) as e:
            read_status(tmp_path)
        assert "another ActorQ version" in str(e.value)


def test_a_renamed_field_is_an_error():
    data = to_dict(ActorStatus(role="actor", label="actor_0", step=12))
    data["steps"] = data.pop("step")  # a rename on the writing side
    with pytest.raises(StatusError, match="missing field\\(s\\) step;"):
        from_dict(data)
    data["step"] = 12  # the old name back beside the new one: the new one is unknown here
    with pytest.raises(StatusError, match="has no field\\(s\\) steps;"):
        from_dict(data)
    with pytest.raises(StatusError, match="unknown role"):
        from_dict({"role": "critic", "label": "critic"})
    with pytest.raises(StatusError, match="JSON object"):
        from_dict([1, 2])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("step", "12"),  # a string where an int belongs
        ("step", 1.5),
        ("step", True),  # bool is an int to Python, not to a record
        ("pid", None),
        ("label", 3),
        ("time", "now"),
        ("cpu_s", "1.0"),  # may be null, never a string
        ("episode_return", [1.0]),
        ("breakdown_s", {"env": "fast"}),
        ("breakdown_s", [1.0]),
    ],
)
def test_a_field_of_the_wrong_type_is_an_error(tmp_path, field, value):
    record = ActorStatus(role="actor", label="actor_0", step=12, breakdown_s={"env": 1.0})
    path = _written(tmp_path, record, lambda d: d.update({field: value}))
    with pytest.raises(StatusError, match=rf"{re.escape(path)}: field {field} of ActorStatus must be "):
        read_status(tmp_path)


def test_values_that_may_be_null_or_integral_parse():
    data = to_dict(ActorStatus(role="actor", label="actor_0", cpu_s=None, episode_return=None))
    data["time"] = 1700000000  # JSON does not tell 1.0 from 1
    assert from_dict(data).time == 1700000000
    data["cpu_s"], data["episode_return"] = 2.5, -3
    assert from_dict(data).episode_return == -3


def test_a_bad_evaluation_entry_names_its_index_and_field(tmp_path):
    record = EvaluatorStatus(
        role="evaluator",
        label="evaluator",
        evaluations=(Evaluation(time=1.0, learner_step=3, actor_steps=40, eval_return=9.5),) * 2,
    )
    path = _written(tmp_path, record, lambda d: d["evaluations"][1].pop("eval_return"))
    with pytest.raises(
        StatusError,
        match=rf"{re.escape(path)}, evaluations\[1\]: Evaluation is missing field\(s\) eval_return",
    ):
        read_status(tmp_path)
    path = _written(tmp_path, record, lambda d: d["evaluations"][0].update(learner_step="3"))
    with pytest.raises(StatusError, match=r"evaluations\[0\]: field learner_step of Evaluation must be int"):
        read_status(tmp_path)
    path = _written(tmp_path, record, lambda d: d.update(evaluations={"0": {}}))
    with pytest.raises(StatusError, match="field evaluations is a list"):
        read_status(tmp_path)


def test_an_absent_record_reads_as_none_and_an_unparsable_one_is_an_error(tmp_path):
    assert read_status(tmp_path) is None  # the role has not written one yet
    (tmp_path / STATUS_FILE).write_text("{half a rec")  # writes are atomic: this is not a record in progress
    with pytest.raises(StatusError, match=rf"{re.escape(str(tmp_path / STATUS_FILE))}: not JSON"):
        read_status(tmp_path)


def test_records_are_replaced_whole(tmp_path):
    write_status(tmp_path, ActorStatus(role="actor", label="actor_0", step=1))
    write_status(tmp_path, ActorStatus(role="actor", label="actor_0", step=2))
    assert read_status(tmp_path).step == 2
    assert [p.name for p in tmp_path.iterdir()] == [STATUS_FILE]  # no temporary file left behind
