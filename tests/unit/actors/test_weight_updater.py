"""The actor's async weight updater: no error in a pull ends it, and if the thread ends anyway the actor fails
loudly (its supervisor restarts it) instead of acting on stale weights forever."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.actors.actor import QuantizedActor, WeightUpdaterDiedError
from actorq.actors.policy import ActorPolicy
from actorq.config import replace
from tests.conftest import tiny_config
from tests.unit.test_weights_key import LAYERS, OBS, OUT, _signed
from tests.waiting import wait_until


class _Table:
    """A subscriber whose next pull raises ``error`` (once), else returns ``buffer``."""

    def __init__(self) -> None:
        self.buffer: np.ndarray | None = None
        self.error: BaseException | None = None

    def latest(self, timeout_s=None):
        error, self.error = self.error, None
        if error is not None:
            raise error
        return self.buffer


def _async_actor() -> tuple[QuantizedActor, _Table]:
    config = tiny_config("dqn")
    config = replace(config, actor=replace(config.actor, async_update=True, update_period=1))
    table = _Table()
    policy = ActorPolicy("dqn", OBS, OUT, LAYERS, precision="int8")
    actor = QuantizedActor(config, policy, None, table, key=None)
    return actor, table


def _pulls(actor: QuantizedActor, until) -> None:
    def step():
        actor._steps_since_pull = 1  # an update period's env steps: wakes the updater
        actor.update()
        return until()

    wait_until(step, 20, "the updater", poll_s=0.02)


def test_an_unexpected_error_in_a_pull_leaves_the_updater_running():
    actor, table = _async_actor()
    try:
        table.error = KeyError("a bug in a subscriber")
        _pulls(actor, lambda: actor.weights.pull_failures >= 1)
        assert actor._updater.is_alive()
        table.buffer = _signed(3)
        _pulls(actor, lambda: actor.weights.version == 3)
    finally:
        actor.close()


def test_an_updater_thread_that_ended_fails_the_actor():
    actor, table = _async_actor()
    try:
        table.error = SystemExit("the thread is gone")  # not an Exception: ends the thread
        with pytest.raises(WeightUpdaterDiedError, match="weight updater thread ended"):
            _pulls(actor, lambda: False)
    finally:
        actor.close()
