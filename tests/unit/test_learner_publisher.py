"""The learner's weight-publisher thread: a replay error is logged and the next weights are tried; any other
error ends the thread and is raised by the learner's next ``submit`` (never lost in a thread)."""

from __future__ import annotations

import numpy as np
import pytest
import reverb

from actorq.roles.learner import _BackgroundPublisher
from actorq.roles.version_record import VersionRecord
from tests.waiting import wait_until

VARIABLES = {"w": np.zeros((2, 2), np.float32)}


class _Publisher:
    def __init__(self, error: BaseException | None) -> None:
        self.error, self.calls = error, 0

    def publish(self, buf) -> None:
        self.calls += 1
        if self.error is not None and self.calls == 1:
            raise self.error


def test_a_replay_error_is_retried_with_the_next_weights(tmp_path) -> None:
    sink = _Publisher(reverb.errors.DeadlineExceededError("Insert call did not complete within 5s"))
    publisher = _BackgroundPublisher(sink, None, VersionRecord(tmp_path / "v.json", ""), 0)
    publisher.submit(VARIABLES, 1)
    wait_until(lambda: sink.calls == 1, 30, "the first publish")
    publisher.submit(VARIABLES, 2)
    wait_until(lambda: publisher.published == 1, 30, "the second publish")
    assert publisher.error is None
    publisher.close()


@pytest.mark.parametrize(
    "bug", [ValueError("a bug, not an outage"), RuntimeError("not an outage either")], ids=type
)
def test_another_error_is_raised_by_the_next_submit(tmp_path, bug) -> None:
    sink = _Publisher(bug)
    publisher = _BackgroundPublisher(sink, None, VersionRecord(tmp_path / "v.json", ""), 0)
    publisher.submit(VARIABLES, 1)
    wait_until(lambda: publisher.error is not None, 30, "the publisher thread to fail")
    with pytest.raises(RuntimeError, match="weight publisher thread failed") as err:
        publisher.submit(VARIABLES, 2)
    assert err.value.__cause__ is bug
