"""The private Acme/Sonnet (actorq/learners/acme_adapter.py) and Launchpad (actorq/launchers/launchpad_adapter.py)
surfaces: present in the installed packages (each member its own test, so a failure names it), each check fails
on a class that lost or reshaped its member, and no other module under actorq/ touches those names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from actorq.launchers import launchpad_adapter
from actorq.learners import acme_adapter

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {"actorq/learners/acme_adapter.py", "actorq/launchers/launchpad_adapter.py"}


@pytest.mark.parametrize("entry", acme_adapter._SURFACE, ids=lambda e: f"{e[0].rsplit('.', 1)[1]}.{e[1]}")
def test_installed_acme_has_member(entry: tuple[str, str, str]) -> None:
    assert acme_adapter._problem(*entry) is None


def test_installed_launchpad_has_members() -> None:
    assert launchpad_adapter.missing_surface() == []
    launchpad_adapter.check_surface()


class _NewStyleLearner:
    """Acme after 0.4.0: ``_step(self, sample)``, and no ``_iterator``."""

    def __init__(self) -> None:
        self._num_steps = 0

    def _step(self, sample):
        return sample


class _TfFunction:
    def __init__(self, fn) -> None:
        self.python_function = fn

    def __call__(self, *args):
        return self.python_function(*args)


_NewStyleLearner._step = _TfFunction(_NewStyleLearner._step)


def test_check_names_a_reshaped_step_and_a_missing_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acme_adapter, "_resolve", lambda path: _NewStyleLearner)
    monkeypatch.setattr(
        acme_adapter,
        "_SURFACE",
        (
            ("x.Learner", "_step", "step"),
            ("x.Learner", "_iterator", "attribute"),
            ("x.Learner", "_num_steps", "attribute"),
        ),
    )
    with pytest.raises(acme_adapter.AcmeSurfaceError) as err:
        acme_adapter.check_surface()
    text = str(err.value)
    assert "x.Learner._step: takes (self, sample)" in text
    assert "x.Learner._iterator: no longer assigned" in text
    assert "_num_steps" not in text


def test_check_names_a_missing_method(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acme_adapter, "_resolve", lambda path: object)
    monkeypatch.setattr(acme_adapter, "_SURFACE", (("x.Adam", "_initialize", "method"),))
    assert acme_adapter.missing_surface() == ["x.Adam._initialize: no longer a method"]


def test_launchpad_check_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from launchpad.launch import worker_manager

    class Renamed:
        def __init__(self) -> None:
            self._workers = {}

    monkeypatch.setattr(worker_manager, "WorkerManager", Renamed)
    with pytest.raises(launchpad_adapter.LaunchpadSurfaceError) as err:
        launchpad_adapter.check_surface()
    assert "WorkerManager._disable_signals" in str(err.value)
    assert "WorkerManager._active_workers" in str(err.value)


def test_iterator_replaced_restores_on_error() -> None:
    class Learner:
        _iterator = iter([1])

    learner, real = Learner(), Learner._iterator
    with pytest.raises(ValueError), acme_adapter.iterator_replaced(learner, iter([2])):
        assert next(learner._iterator) == 2
        raise ValueError
    assert learner._iterator is real


def _private_names() -> set[str]:
    names = {member for _, member, _ in acme_adapter._SURFACE}
    return names | {"_active_workers", "_disable_signals"}


def test_private_names_only_in_the_adapters() -> None:
    """``x._step``, ``manager._active_workers``, ... (anything but ``self.``/``cls.``) only in the two adapters."""
    names, found = _private_names(), []
    for path in sorted((ROOT / "actorq").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ADAPTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Attribute) and node.attr in names:
                owner = node.value.id if isinstance(node.value, ast.Name) else None
                if owner not in ("self", "cls") or node.attr in ("_active_workers", "_disable_signals"):
                    found.append(f"{rel}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in ("_step", "_iterator"):
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert found == []


def test_a_learner_class_is_checked_for_the_members_actorq_uses():
    from acme.agents.tf.d4pg.learning import D4PGLearner
    from acme.agents.tf.dqn.learning import DQNLearner

    assert acme_adapter.missing_learner_members(D4PGLearner, acme_adapter.ACTOR_CRITIC_MEMBERS) == []
    acme_adapter.check_learner_class(D4PGLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
    missing = acme_adapter.missing_learner_members(DQNLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
    assert missing == [
        "acme.agents.tf.dqn.learning.DQNLearner._policy_optimizer: no longer assigned in __init__",
        "acme.agents.tf.dqn.learning.DQNLearner._critic_optimizer: no longer assigned in __init__",
    ]
    with pytest.raises(acme_adapter.AcmeSurfaceError, match="DQNLearner._policy_optimizer"):
        acme_adapter.check_learner_class(DQNLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
