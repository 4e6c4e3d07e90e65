"""The supervisor against the placement protocol, with a stand-in placement (no processes, no TensorFlow): restarts
go through ``Placement.restart`` and are counted by the supervisor, a placement that cannot restart ends the run,
restarts the placement made on its own count too, and summary.json names the key by the one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from actorq.launchers.placement import Placement, RunContext
from actorq.launchers.ray_placement import RayPlacement
from actorq.launchers.supervisor import MAX_RESTARTS, Supervisor, run_context
from actorq.launchers.topology import RoleSpec
from actorq.weights_key import KEY_ENV, ensure_run_key, load_key_file, run_key_path
from tests.conftest import tiny_config


class _Stub(Placement):
    """Every role runs until ``dead`` names it; ``restartable`` says whether :meth:`restart` can bring it back."""

    name = "stub"

    def __init__(self, run: RunContext, restartable: bool, own_restarts: int = 0):
        super().__init__(run)
        self.restartable, self.own_restarts = restartable, own_restarts
        self.dead: set[str] = set()
        self.restarted: list[str] = []

    def start(self, spec: RoleSpec, address: str) -> None:
        pass

    def wait_replay(self, spec: RoleSpec, timeout_s: float) -> str:
        return "localhost:1"

    def exit_code(self, label: str) -> int | None:
        return 1 if label in self.dead else None

    def restart(self, label: str) -> bool:
        if self.restartable:
            self.dead.discard(label)
            self.restarted.append(label)
        return self.restartable

    def restarts(self, label: str) -> int:
        return self.own_restarts if label == "actor_0" else 0

    def stop(self, labels: list[str], grace_s: float) -> dict[str, int | None]:
        return dict.fromkeys(labels, 0)


def _context(tmp_path: Path) -> RunContext:
    return RunContext(tiny_config("dqn"), tmp_path, tmp_path / "config.yaml", 1, None, quiet=True)


def _poll(supervisor: Supervisor, monkeypatch, seconds: float) -> str | None:
    """One health check ``seconds`` after now (the restart backoff is read from the monotonic clock)."""
    import actorq.launchers.supervisor as module

    now = module.time.monotonic()
    monkeypatch.setattr(module.time, "monotonic", lambda: now + seconds)
    try:
        return supervisor._check_roles()
    finally:
        monkeypatch.undo()


def test_a_dead_role_is_restarted_through_the_placement_and_counted(tmp_path, monkeypatch):
    placement = _Stub(_context(tmp_path), restartable=True)
    supervisor = Supervisor(placement)
    placement.dead.add("actor_0")
    assert supervisor._check_roles() is None and placement.restarted == []  # backing off first
    assert _poll(supervisor, monkeypatch, 5) is None
    assert placement.restarted == ["actor_0"] and supervisor.monitor.summary("x")["restarts"] == {
        "actor_0": 1
    }


def test_a_placement_that_cannot_restart_ends_the_run(tmp_path, monkeypatch):
    placement = _Stub(_context(tmp_path), restartable=False)
    supervisor = Supervisor(placement)
    placement.dead.add("actor_0")
    assert supervisor._check_roles() is None
    assert _poll(supervisor, monkeypatch, 5) == "role_failed"
    assert supervisor.failure.startswith("actor_0 exited with 1")


def test_the_placements_own_restarts_count_and_use_up_the_budget(tmp_path):
    placement = _Stub(_context(tmp_path), restartable=True, own_restarts=MAX_RESTARTS)
    supervisor = Supervisor(placement)
    assert supervisor._check_roles() is None
    # A closed placement answers no more (Ray's actor table): the last reading counts.
    placement.own_restarts = 0
    assert supervisor.monitor.summary("x")["restarts"] == {"actor_0": MAX_RESTARTS}
    placement.own_restarts = MAX_RESTARTS
    placement.dead.add("actor_0")
    assert supervisor._check_roles() == "role_failed" and placement.restarted == []


def test_a_dead_learner_ends_the_run_at_once(tmp_path):
    placement = _Stub(_context(tmp_path), restartable=True)
    supervisor = Supervisor(placement)
    placement.dead.add("learner")
    assert supervisor._check_roles() == "role_failed" and placement.restarted == []


def test_the_launcher_takes_its_key_by_the_same_rule_as_the_roles(tmp_path, monkeypatch):
    config = tiny_config("dqn")
    flag, env = ensure_run_key(tmp_path / "flag"), ensure_run_key(tmp_path / "env")
    monkeypatch.setenv(KEY_ENV, str(env))
    assert run_context(config, tmp_path / "a", "c.yaml", weights_key_file=flag).weights_key_file == flag
    assert run_context(config, tmp_path / "b", "c.yaml").weights_key_file == env
    assert not run_key_path(tmp_path / "b").exists()  # the environment's key is used: none made in RUN_DIR
    monkeypatch.delenv(KEY_ENV)
    made = run_context(config, tmp_path / "c", "c.yaml").weights_key_file
    assert made == run_key_path(tmp_path / "c") and made.exists()
    assert run_context(config, tmp_path / "c", "c.yaml").weights_key_file == made  # --resume reuses it
    # The summary names the key the roles were given.
    signing = _Stub(
        run_context(config, tmp_path / "a", "c.yaml", weights_key_file=flag), True
    ).weights_signing()
    assert signing == {"scheme": "hmac-sha256", "run_id": load_key_file(flag).run_id_hex}


@pytest.mark.parametrize("mixed", [False, True])
def test_ray_summary_names_the_key_its_roles_loaded(tmp_path, mixed):
    ours, theirs = (load_key_file(ensure_run_key(tmp_path / name)) for name in ("ours", "theirs"))
    placement = RayPlacement(_context(tmp_path))
    placement.run = RunContext(
        tiny_config("dqn"), tmp_path, tmp_path / "c.yaml", 1, run_key_path(tmp_path / "ours"), quiet=True
    )

    class _Seen:
        def __init__(self, key):
            self.where = {"weights_run_id": key.run_id_hex}

    placement.roles = {"learner": _Seen(theirs), "actor_0": _Seen(ours if mixed else theirs)}
    signing = placement.weights_signing()
    if mixed:
        assert signing["run_id"] == "mixed"
        assert signing["per_role"] == {"learner": theirs.run_id_hex, "actor_0": ours.run_id_hex}
    else:  # what the roles loaded on their hosts, not the launcher's file
        assert signing == {"scheme": "hmac-sha256", "run_id": theirs.run_id_hex}
