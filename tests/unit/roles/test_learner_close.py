"""The learner saves its state when its host closes it with the loop still blocked (the loop never gets back to
its own final save then): the state at a stop is kept whichever role stops first."""

from __future__ import annotations

import threading

import pytest

from actorq.roles.host import RoleHost
from actorq.roles.learner import LearnerRole
from tests.conftest import tiny_config
from tests.waiting import wait_until


class _Learner:
    """The Acme learner wrapper's surface the role uses at a stop: its step counter and ``save``."""

    def __init__(self):
        self.steps = 0
        self.saved: list[tuple[int, bool]] = []
        self.losses: dict[str, float] = {}

    def save(self, force: bool = False) -> bool:
        if force:
            self.saved.append((self.steps, force))
        return force


class _BlockedLearnerRole(LearnerRole):
    """The real role's stop path; its step blocks as a sample from a replay server that stopped first does."""

    def __init__(self, config, run_dir):  # no TensorFlow, no replay: only what a stop touches
        super(LearnerRole, self).__init__(config, run_dir)
        self.learner = _Learner()
        self.inside, self.release = threading.Event(), threading.Event()

    def step(self) -> None:
        self.learner.steps += 1
        if self.learner.steps == 7:
            self.inside.set()
            self.release.wait()

    def write_metrics(self) -> None:
        self.metrics.write({"step": self.learner.steps})

    def status_record(self):
        from actorq.status import LearnerStatus

        return LearnerStatus(**self.status_fields(), step=self.learner.steps)

    def run(self, stop: threading.Event) -> None:
        super(LearnerRole, self).run(stop)  # RoleBase's loop (the publisher and watchdog are not built here)


def test_a_learner_blocked_at_the_stop_saves_the_step_it_reached(tmp_path, monkeypatch):
    role = _BlockedLearnerRole(tiny_config("dqn"), tmp_path)
    monkeypatch.setattr("actorq.roles.host.build_role", lambda *args, **kwargs: role)
    host = RoleHost("learner", tiny_config("dqn"), tmp_path, address="localhost:1", own_process=False,
                    insecure_weights=True)  # fmt: skip
    host.build()
    host.start()
    wait_until(role.inside.is_set, 10, "the learner's step to block")
    assert role.learner.saved == []
    assert host.stop(grace_s=0.2) == 0 and host.running()  # still blocked: the host closed it
    assert role.learner.saved == [(7, True)]
    role.release.set()


@pytest.mark.reverb
def test_a_real_learner_blocked_sampling_saves_its_checkpoint_when_its_host_stops(tmp_path, reverb_server):
    """The real learner, its step blocked inside TensorFlow on Reverb's rate limiter (an empty table: as when the
    actors are gone, or replay stopped first): the host's stop saves a checkpoint from another thread and returns."""
    import time

    from actorq.config import replace

    config = replace(tiny_config("dqn"), **{"learner.checkpoint_period_s": 600.0})
    server = reverb_server(config)
    host = RoleHost("learner", config, tmp_path, address=f"localhost:{server.port}", own_process=False,
                    insecure_weights=True)  # fmt: skip
    host.build()
    host.start()
    # Blocked in its first sample (no experience): the loop is alive and no step was made.
    wait_until(lambda: host.running() and host.instance.learner.steps == 0, 30, "the learner's loop to start")
    started = time.monotonic()
    assert host.stop(grace_s=0.5) == 0
    assert time.monotonic() - started < 30, "saving beside the blocked step must not hang the stop"
    assert host.running()  # still blocked inside TensorFlow: only the host's close saved
    assert list((tmp_path / "checkpoints" / "learner").rglob("*.index")), "no checkpoint was written"
