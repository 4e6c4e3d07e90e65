"""The one role host (:mod:`actorq.roles.host`): its stop with a blocked loop, the key it resolves, and the
placements that run roles through it (``actorq role``, in-process threads, Ray's role actor), without TensorFlow."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pytest

from actorq.launchers import ray_role
from actorq.metrics import read_metrics
from actorq.roles import host as host_module
from actorq.roles.base import RoleBase
from actorq.roles.host import RoleHost
from actorq.roles.process_setup import ONEDNN_ENV
from actorq.status import LearnerStatus, read_status
from actorq.weights_key import KEY_ENV, ensure_run_key, load_key_file, run_key_path
from tests.conftest import tiny_config
from tests.waiting import wait_until


class _BlockedLearner(RoleBase):
    """A role whose step blocks, ignoring the stop event (as an insert held by Reverb's rate limiter does)."""

    name = "learner"

    def __init__(self, config, run_dir):
        super().__init__(config, run_dir)
        self.steps = 0
        self.inside = threading.Event()
        self.release = threading.Event()

    def step(self) -> None:
        self.steps += 1
        self.inside.set()
        self.release.wait()

    def write_metrics(self) -> None:
        self.metrics.write({"step": self.steps, "steps": self.steps})

    def status_record(self) -> LearnerStatus:
        return LearnerStatus(**self.status_fields(), step=self.steps)


class _Failing(_BlockedLearner):
    def step(self) -> None:
        raise RuntimeError("boom")


class _Builds(list):
    """What the stand-in ``build_role`` built: one dict (role, key, insecure) per call; ``cls`` is what it builds."""

    cls: type = _BlockedLearner


@pytest.fixture
def fake_roles(monkeypatch):
    """``build_role`` builds a stand-in and records the key it was given."""
    built = _Builds()

    def build(role, config, run_dir, *args, weights_key=None, insecure_weights=False):
        built.append({"role": role, "key": weights_key, "insecure": insecure_weights})
        return built.cls(config, run_dir)

    monkeypatch.setattr(host_module, "build_role", build)
    return built


def _host(tmp_path, **kwargs) -> RoleHost:
    kwargs.setdefault("insecure_weights", True)
    return RoleHost(
        "learner", tiny_config("dqn"), tmp_path, address="localhost:1", own_process=False, **kwargs
    )


def test_a_blocked_loop_gets_its_metrics_and_status_written_at_the_stop(tmp_path, fake_roles):
    host = _host(tmp_path)
    host.build()
    host.start()
    wait_until(host.instance.inside.is_set, 10, "the role's first step")
    assert read_status(tmp_path / "learner") is None  # nothing written yet: only the stop below writes
    assert host.stop(grace_s=0.2) == 0
    assert host.running()  # still blocked: the host wrote for it
    record = read_status(tmp_path / "learner")
    assert isinstance(record, LearnerStatus) and record.step == 1
    assert read_metrics(tmp_path / "learner" / "metrics.csv")[-1]["steps"] == 1
    host.instance.release.set()


def test_a_failing_loop_reports_its_error_and_status_1(tmp_path, fake_roles):
    fake_roles.cls = _Failing
    ended: list[RoleHost] = []
    host = _host(tmp_path, on_exit=ended.append)
    host.build()
    host.start()
    wait_until(lambda: ended, 10, "the loop to end")
    assert host.code == 1 and host.error == "RuntimeError: boom" and host.stop_event.is_set()
    assert host.stop(grace_s=1) == 1


def test_the_host_resolves_the_key_by_the_one_rule(tmp_path, fake_roles):
    run_key = load_key_file(ensure_run_key(tmp_path / "run"))
    flag = load_key_file(ensure_run_key(tmp_path / "flag"))
    env = {KEY_ENV: str(run_key_path(tmp_path / "env"))}
    env_key = load_key_file(ensure_run_key(tmp_path / "env"))

    def key(**kwargs):
        host = RoleHost(
            "learner", tiny_config("dqn"), tmp_path / "run", address="h:1", own_process=False, **kwargs
        )
        host.build()
        assert fake_roles[-1]["key"] == host.key
        return host.key

    assert key(key_file=run_key_path(tmp_path / "flag"), environ=env) == flag  # the flag first
    assert key(environ=env) == env_key  # then the environment
    assert key(environ={}) == run_key  # then the run directory
    assert key(insecure_weights=True, environ=env) is None


def test_the_ray_role_prefers_the_launchers_key_file_and_writes_status_at_a_blocked_stop(
    tmp_path, fake_roles, monkeypatch
):
    """Ray's role actor runs its role through the host: the launcher's key file wins over $ACTORQ_WEIGHTS_KEY_FILE
    (as for ``actorq role``), and a stop with the loop blocked writes the status record, not only metrics."""
    launcher_key = ensure_run_key(tmp_path / "run")
    monkeypatch.setenv(
        ONEDNN_ENV, "1"
    )  # the host sets the learner's environment here: restored after the test
    monkeypatch.setenv(KEY_ENV, str(ensure_run_key(tmp_path / "elsewhere")))
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        actor = ray_role.RoleActor(
            "learner", "learner", {}, str(tmp_path / "run"), "h:1", 0, None, str(launcher_key), False
        )
        assert actor.host.key == load_key_file(launcher_key)
        wait_until(actor.instance.inside.is_set, 10, "the role's first step")
        assert actor.exit_status() is None
        assert actor.stop(0.2) == 0
        assert read_status(tmp_path / "run" / "learner").step == 1
        actor.instance.release.set()
    finally:
        for handler in set(root.handlers) - set(handlers):
            root.removeHandler(handler)
            handler.close()


@pytest.mark.subprocess
def test_actorq_role_sets_the_learners_environment_before_tensorflow_loads(tmp_path):
    """The process entry pins and sets the learner's environment before anything imports reverb/TensorFlow (an
    unreachable replay ends it with status 3 after TensorFlow loaded)."""
    config = tmp_path / "c.yaml"
    from actorq.config import save_config

    save_config(tiny_config("dqn"), config)
    r = subprocess.run(
        [sys.executable, "-m", "actorq.roles", "learner", "--config", str(config), "--run-dir", str(tmp_path)]
        + ["--replay-address", "localhost:1", "--connect-timeout", "0.5", "--insecure-weights"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 3, r.stderr[-2000:]
    assert "did not answer" in r.stderr and "TensorFlow was loaded before" not in r.stderr
