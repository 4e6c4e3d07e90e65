"""When a run with a ``target_return`` stops: by the report's threshold rule, so that the run a launcher stops at
its target is the run the report counts as having reached it there, and the report's threshold is that target."""

from __future__ import annotations

import pytest

from actorq.launchers.monitor import RunMonitor
from actorq.report import stats
from actorq.status import Evaluation, EvaluatorStatus
from tests.conftest import tiny_config

STARTED = 1_000.0


def _monitor(tmp_path, returns, steps, target=195.0) -> RunMonitor:
    evaluations = tuple(
        Evaluation(time=STARTED + 10 * (i + 1), learner_step=s, actor_steps=100 * (i + 1), eval_return=r)
        for i, (r, s) in enumerate(zip(returns, steps, strict=True))
    )
    records = {"evaluator": EvaluatorStatus(role="evaluator", label="evaluator", evaluations=evaluations)}
    config = tiny_config("dqn", target_return=target, max_minutes=0)
    return RunMonitor(config, tmp_path, records.get, list(records), started=STARTED)


@pytest.mark.parametrize(
    ("returns", "steps", "reached_at"),
    [
        # one lucky greedy episode of a trained network is not a learned policy
        ([20.0, 500.0], [10, 20], None),
        # an untrained network's evaluations (learner step 0) neither count nor lift a trained window
        ([500.0, 500.0, 500.0, 100.0, 100.0], [0, 0, 0, 10, 20], None),
        ([500.0, 100.0, 200.0, 285.0], [0, 10, 20, 30], 3),  # mean of the 3 trained ones: 195.0
        ([100.0, 200.0, 284.0, 500.0], [10, 20, 30, 40], 3),  # 194.67 at index 2, then 328
    ],
)
def test_a_run_stops_at_its_target_when_the_reports_rule_says_it_reached_it(
    tmp_path, returns, steps, reached_at
):
    monitor = _monitor(tmp_path, returns, steps)
    hit = monitor.target_evaluation()
    assert (None if hit is None else monitor.evaluations().index(hit)) == reached_at
    assert monitor.stop_reason() == (None if reached_at is None else "target")
    # the report's own rule on the same curve
    assert stats.first_crossing(returns, steps, 195.0) == reached_at
    summary = monitor.summary("target" if reached_at is not None else "max_minutes", wall_seconds=60.0)
    expected = None if reached_at is None else 10.0 * (reached_at + 1)
    assert summary["seconds_to_target"] == expected
    assert summary["learner_steps_to_target"] == (None if reached_at is None else steps[reached_at])


def test_no_target_never_stops_a_run_on_its_returns(tmp_path):
    monitor = _monitor(tmp_path, [500.0] * 5, [10, 20, 30, 40, 50], target=None)
    assert monitor.target_evaluation() is None and monitor.stop_reason() is None
